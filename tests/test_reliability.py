"""Faults injected for real: each ends as a row, finished trials stay intact, nothing is left running."""
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from sweeper.results import LEFTOVER_PREFIXES, read_records
from tests.conftest import ROOT, checkout_first, named, title

pytestmark = pytest.mark.slow

FAST = ["workload.steps=5", "workload.warmup_steps=1", "resources.isolation=pack"]
T = "tests.workloads_for_tests"


def only_run(tmp_path, sweep="single"):
    runs = [p for p in (tmp_path / "results" / sweep).iterdir() if (p / "trials").is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def by_target(run):
    return {r["swept"].get("workload.target", r["trial_id"]): r for r in read_records(run)}


def zygotes_and_trials_alive(pids):
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_failures_are_rows_and_the_sweep_goes_on(sweeper_cli, tmp_path):
    targets = f"{T}:quick,{T}:raises,{T}:kills_itself,{T}:grabs_memory,{T}:cuda_oom_above,{T}:hangs"
    result = sweeper_cli([f"workload.target={targets}", "data.batch_size=8", "resources.timeout_s=8",
                          "resources.memory_limit_gb=0.5", *FAST], timeout=240)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    records = by_target(only_run(tmp_path))
    status = {t.split(":")[1]: (r["status"], r["error_type"]) for t, r in records.items()}
    assert status == {
        "quick": ("ok", None),
        "raises": ("failed", "ValueError"),
        "kills_itself": ("failed", "TrialKilled"),
        "grabs_memory": ("oom", "MemoryError"),
        "cuda_oom_above": ("oom", "OutOfMemoryError"),
        "hangs": ("timeout", "TrialTimeout"),
    }
    assert records[f"{T}:raises"]["error_message"] == "injected failure for the test"
    assert records[f"{T}:grabs_memory"]["figures"]["host_rss_gb_at_end"] > 0.1
    assert "CUDA out of memory" in records[f"{T}:cuda_oom_above"]["error_message"]
    assert "SIGKILL" in records[f"{T}:kills_itself"]["error_message"]
    # the table says what failed, with the overrides to reproduce it
    assert "5 trial(s) did not finish; to reproduce one:" in result.stdout
    repro = [line for line in result.stdout.splitlines() if line.startswith("  python -m sweeper ")]
    assert len(repro) == 5
    assert any(f"workload.target={T}\\:hangs" in line and line.endswith("# timeout: TrialTimeout")
               for line in repro)   # Hydra escapes ':' in overrides; the line runs as printed
    assert zygotes_and_trials_alive([r["pid"] for r in records.values() if r["pid"]]) == []


# Retries, OOM shrinking and infeasible requests: the driver's part is tested in-process with a
# fake executor (tests/test_driver.py); what a real trial process reports is tested above.


def digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def test_interrupt_then_resume_keeps_finished_trials_and_completes_the_grid(tmp_path):
    from tests.conftest import run_sweeper

    # executor=local: the driver's own interrupt and resume; Ray's trials under Ctrl-C are the next tests'
    held = tmp_path / "held"          # the trials take 2 s each until it goes, before the resume
    held.touch()
    args = [f"workload.target={T}:quick", "+workload.params.sleep_s=0.2", "workload.steps=10",
            f"+workload.params.held_while={held}", "workload.warmup_steps=0", "workload.seed=0,1,2,3,4,5",
            "executor=local"]
    env = {**os.environ, "SWEEPER_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": checkout_first()}
    driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *args],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            trials = list((tmp_path / "results" / "single").glob("*/trials/*/trial.json"))
            if len([t for t in trials if not t.parent.name.startswith(LEFTOVER_PREFIXES)]) >= 2:
                break
            time.sleep(0.2)
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=90)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, (out[-3000:], err[-3000:])
    run = only_run(tmp_path)
    records = read_records(run)
    finished = {r["trial_id"]: digest(run / "trials" / r["trial_id"]) for r in records if r["status"] == "ok"}
    assert 2 <= len(finished) < 6
    assert {r["status"] for r in records} <= {"ok", "cancelled"}
    assert zygotes_and_trials_alive([r["pid"] for r in records if r.get("pid")]) == []

    # a half-written trial folder: its last file never landed
    (run / "trials" / ".staging-deadbeef-0-1234").mkdir()
    first_ok = sorted(finished)[0]
    (run / "trials" / first_ok / "trial.json").unlink()

    held.unlink()
    resumed = run_sweeper(args + ["resume=latest"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {run}: {len(finished) - 1} trial(s) already finished" in resumed.stdout
    summary = pd.read_parquet(run / "summary.parquet")
    assert len(summary) == 6 and summary["trial_id"].is_unique and (summary["status"] == "ok").all()
    for trial_id, files in finished.items():
        if trial_id != first_ok:
            assert digest(run / "trials" / trial_id) == files    # untouched, byte for byte
    assert not list((run / "trials").glob(".*"))
    assert len(list((tmp_path / "results" / "single").iterdir())) == 1   # no second run folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_gcs(address: str, timeout_s: float = 120) -> None:
    """Until the head's GCS port answers: a second node may start joining then, while the head
    still starts its own raylet (`ray start --address` waits for the rest)."""
    host, port = address.split(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"no Ray head answers at {address}"
            time.sleep(0.3)


def wait_for_nodes(address: str, count: int, env: dict, timeout_s: float = 180) -> None:
    """Until the cluster at `address` has `count` live nodes (asked from a separate process)."""
    code = ("import ray, sys; ray.init(address=sys.argv[1], _node_ip_address='127.0.0.1', logging_level='ERROR'); "
            "print(sum(n['Alive'] for n in ray.nodes()))")
    deadline = time.monotonic() + timeout_s
    wait_for_gcs(address, timeout_s)
    while time.monotonic() < deadline:
        probe = subprocess.run([sys.executable, "-c", code, address], env=env, capture_output=True, text=True,
                               timeout=120)
        if probe.returncode == 0 and probe.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        time.sleep(1)
    raise AssertionError(f"the test cluster at {address} did not reach {count} node(s)")


def kill_machine(root_pid: int) -> None:
    """Every process of one `ray start` node, as when its machine is lost. Ray puts each worker in a
    process group of its own, so killing the node's group leaves its workers running: they could still
    finish their tasks and hand back the results. Stop the whole tree first (nothing forks meanwhile),
    then kill it."""
    root = psutil.Process(root_pid)
    tree = [root, *root.children(recursive=True)]
    for proc in tree:
        try:
            proc.send_signal(signal.SIGSTOP)
        except psutil.NoSuchProcess:
            pass
    tree += [p for p in root.children(recursive=True) if p not in tree]   # forked before the stop landed
    for proc in tree:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=10)


def test_lost_node_mid_sweep_is_retried_on_the_surviving_node(tmp_path):
    ray_bin = str(Path(sys.executable).parent / "ray")
    port = free_port()
    # Every Ray process of this test (head, node, driver) keeps to the loopback address.
    # A token of the test's own lets the driver join the cluster that `ray start` made.
    env = {**os.environ, "PYTHONPATH": checkout_first(), "RAY_ADDRESS": "",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           # the head notices the lost node within about 2 s instead of Ray's default 15-30, and the
           # nodes end as soon as they are told (Ray otherwise drains for up to 30 s on SIGTERM)
           "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
           "RAY_health_check_failure_threshold": "3", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")   # short: Ray's socket paths must fit in 107 bytes
    driver = None
    head = subprocess.Popen([ray_bin, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                             "--node-ip-address=127.0.0.1", "--include-dashboard=false", f"--temp-dir={temp}"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    node = None
    try:
        address = f"127.0.0.1:{port}"
        wait_for_gcs(address)
        node = subprocess.Popen([ray_bin, "start", "--block", f"--address={address}", "--num-cpus=3",
                                 "--node-ip-address=127.0.0.1"],
                                env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_nodes(address, 2, env)
        started, held = tmp_path / "started", tmp_path / "held"
        held.touch()
        args = [f"workload.target={T}:quick_announced", "+workload.params.sleep_s=0.5", "workload.steps=12",
                f"+workload.params.started_dir={started}", f"+workload.params.held_while={held}",
                "workload.warmup_steps=0", "workload.seed=0,1,2,3", "resources.isolation=pack",
                "resources.cpus=1", "resources.max_retries=1", f"ray.address={address}",
                "ray.node_ip_address=127.0.0.1"]
        driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *args],
                                  cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = lines_until(driver, "sweep 'single'")       # the trials are submitted once this line is out
        # three trials running means two or three on the second node (the head has one CPU);
        # each runs 6 s while `held` is there, so the node is lost while they run
        wait_for(lambda: len(list(started.glob("*"))) >= 3, timeout_s=120)
        kill_machine(node.pid)               # which disappears mid-sweep
        held.unlink()                        # the rest, and the trials run again, finish at once
        out, err = driver.communicate(timeout=240)
        assert driver.returncode == 0, "".join(lines) + out[-3000:] + err[-3000:]
        records = read_records(only_run(tmp_path))
        assert len(records) == 4 and all(r["status"] == "ok" for r in records)
        assert any(r["attempts"] == 2 for r in records)   # lost with the node, then run again on the head
    finally:
        if driver is not None and driver.poll() is None:      # a wait that ran out: not left running
            driver.kill()
            driver.communicate()
        for proc in (node, head):
            end_group(proc)
        shutil.rmtree(temp, ignore_errors=True)


def end_group(proc) -> None:
    """Ends a `ray start --block` the test started, with its process group (SIGKILL after 60 s)."""
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


# -- paths, concurrency, leftovers, signals (issue: safe to leave running unattended) ----------
def sweeper_env(tmp_path, **extra):
    return {**os.environ, "SWEEPER_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **extra}


def test_four_sweeps_started_at_once_keep_their_own_run_folder_trials_and_figures(tmp_path):
    """The same run id for all four (what a timestamp gives sweeps started in the same second):
    each takes a folder of its own, and prints and records only its own trials."""
    results = tmp_path / "results"
    procs = [subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={results}", "executor=local",
                               "run_id=same", f"workload.target={T}:quick", "workload.steps=3", "workload.warmup_steps=0",
                               f"workload.seed={10 * i},{10 * i + 1}", "wandb.enabled=false", "report.enabled=false"],
                              cwd=ROOT, env=sweeper_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(4)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-2000:] for _, err in outputs]
    runs = sorted((results / "single").iterdir())
    assert [r.name for r in runs] == ["same", "same-2", "same-3", "same-4"]
    seeds_of = {}
    for run in runs:
        records = read_records(run)
        assert {r["run_id"] for r in records} == {run.name}
        seeds_of[run.name] = sorted(r["swept"]["workload.seed"] for r in records)
    assert sorted(seeds_of.values()) == [[10 * i, 10 * i + 1] for i in range(4)]
    for out, _ in outputs:             # each prints its own figures: the run folder its seeds are in
        run = next(name for name, seeds in seeds_of.items() if f"seed={seeds[0]} " in out)
        assert str(results / "single" / run) in out
        assert all(f"seed={s} " not in out for name, seeds in seeds_of.items() if name != run for s in seeds)
    history = list((results / "history").rglob("*.parquet"))
    assert len(history) == 4 and len({p.name for p in history}) == 4


def test_a_daemon_a_local_trial_double_forks_ends_with_the_trial(tmp_path):
    pid_file = tmp_path / "pids"
    result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", "executor=local",
                             f"workload.target={T}:starts_escapees", f"+workload.params.pid_file={pid_file}",
                             "workload.steps=3", "workload.warmup_steps=0", "wandb.enabled=false",
                             "report.enabled=false", "history.enabled=false"],
                            cwd=ROOT, env=sweeper_env(tmp_path), capture_output=True, text=True, timeout=300)
    child, daemon = [int(p) for p in pid_file.read_text().split()]
    left = zygotes_and_trials_alive([child, daemon])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert left == []            # both were gone when the command returned


def wait_for(predicate, timeout_s=120, poll_s=0.1):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(poll_s)


def lines_until(driver: subprocess.Popen, prefix: str) -> list:
    """The driver's stdout lines up to the first that starts with `prefix`, that one included."""
    lines = []
    for line in driver.stdout:
        lines.append(line)
        if line.startswith(prefix):
            break
    return lines


@contextlib.contextmanager
def two_hanging_ray_trials(tmp_path, **output):
    """A Ray sweep of two trials that hang, with a temp folder of its own (short: Ray's socket paths
    live under it); yields (the driver, that folder) once both trials run."""
    tmp = Path(tempfile.mkdtemp(prefix="st", dir="/tmp"))
    driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
                               f"workload.target={T}:hangs", "workload.seed=0,1", "resources.isolation=pack",
                               "wandb.enabled=false", "report.enabled=false", "history.enabled=false"],
                              cwd=ROOT, env=sweeper_env(tmp_path, TMPDIR=str(tmp)), **output)
    try:
        wait_for(lambda: len(list(tmp.glob("sweeper-scratch-*/sweeper-*"))) == 2)
        yield driver, tmp
    finally:
        driver.kill()
        driver.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def test_ctrl_c_on_ray_trials_leaves_no_scratch_folder_and_one_line(tmp_path):
    with two_hanging_ray_trials(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as (driver, tmp):
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 130, err[-3000:]
        assert err.strip().splitlines() == \
            ["interrupted while trials ran: running trials are cancelled, finished ones kept; resume=latest runs the rest"]
        assert [p.name for p in tmp.iterdir() if p.name.startswith("sweeper-")] == []


def test_a_sigkilled_sweep_leaves_nothing_in_the_temp_folder(tmp_path):
    """The OOM killer takes the driver while its trials run: its watchdog ends the local Ray, then
    removes the session's folder and the driver's own folders (the trials' scratch, the node
    zygote's socket and log), which the driver itself had no chance to."""
    with two_hanging_ray_trials(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as (driver, tmp):
        made = sorted(p.name.rsplit("-", 1)[0] for p in tmp.iterdir() if p.name.startswith(("sweeper-", "ray")))
        assert made == ["ray", "sweeper-node", "sweeper-scratch"], made
        assert list(tmp.glob("ray/session_2*"))
        driver.kill()
        driver.wait()
        wait_for(lambda: not [p for p in tmp.iterdir() if p.name.startswith("sweeper-")]
                 and not list(tmp.glob("ray/session_*")), timeout_s=30)


def test_the_suite_started_with_sigint_ignored_still_stops_on_ctrl_c(tmp_path):
    """A background job of a shell script starts with SIGINT ignored; the suite sets its own handler."""
    (tmp_path / "conf" / "sweep").mkdir(parents=True)
    (tmp_path / "conf" / "sweep" / "hang.yaml").write_text(
        f"# @package _global_\nsweep:\n  name: hang\nworkload:\n  target: {T}:hangs\n")
    cmd = [sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", "+sweep=overnight",
           "overnight.sweeps=[hang]", f"overnight.lock_file={tmp_path / 'lock'}", "executor=local",
           "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]
    suite = subprocess.Popen(cmd, cwd=tmp_path, env=sweeper_env(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_for(lambda: list((tmp_path / "results").glob("overnight/*/hang/*/multirun.yaml")))
        suite.send_signal(signal.SIGINT)
        out, err = suite.communicate(timeout=120)
    finally:
        if suite.poll() is None:
            suite.kill()
    assert suite.returncode == 130, err[-3000:]
    night = next((tmp_path / "results" / "overnight").iterdir())
    manifest = json.loads((night / "night.json").read_text())
    assert manifest["exit_code"] == 130 and manifest["sweeps"][0]["status"] == "interrupted"


def test_another_launcher_is_refused_before_hydra_writes_a_folder(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
                             "hydra/launcher=basic"], cwd=tmp_path, env=sweeper_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: hydra/launcher: only the sweeper launcher runs sweeps; for trials inside this process "
        "(a debugger, a profiler) use executor=local"]
    assert list(tmp_path.iterdir()) == []


def test_a_disk_that_fills_up_mid_sweep_ends_it_in_one_line_and_keeps_what_finished(tmp_path):
    """A results disk of 100 KiB (a real tmpfs) fills after a trial or two: one line naming the run
    folder and exit 74, the trials written before it whole, nothing half-written left; with room
    again, resume=latest runs only the rest."""
    from tests.conftest import in_a_mount_namespace, mount_namespaces

    if not mount_namespaces(tmp_path):
        pytest.skip("needs a mount namespace of its own (unshare --mount, as root) for a small real disk")
    disk = tmp_path / "disk"
    disk.mkdir()
    sweep = (f"{sys.executable} -m sweeper results_dir={disk} workload.target={T}:quick 'workload.seed=0,1,2,3' "
             "executor=local wandb.enabled=false history.enabled=false")
    count = f"{sys.executable} -c \"import sys, pathlib; print(len(list(pathlib.Path(sys.argv[1]).rglob('trial.json'))))\""
    script = (f"mount -t tmpfs -o size=100k tmpfs {disk} && {sweep} >/dev/null 2>err.txt; echo $?; cat err.txt; "
              f"find {disk} -name '.*' | wc -l; {count} {disk}; "
              f"mount -o remount,size=8m {disk} && {sweep} resume=latest >/dev/null 2>&1; echo $?; {count} {disk}")
    result = in_a_mount_namespace(script, tmp_path)
    lines = result.stdout.splitlines()
    assert len(lines) == 6, result.stdout + result.stderr
    full, line, leftovers, kept, resumed, finished = lines
    assert full == "74" and line.startswith(f"error: {disk}/single") and "No space left on device" in line, lines
    assert "resume=latest" in line and leftovers == "0" and 1 <= int(kept) < 4, lines
    assert (resumed, finished) == ("0", "4"), lines


def test_a_ray_address_where_something_else_answers_is_one_line_and_sigterm_is_not_held_up(tmp_path):
    """A port that accepts connections but is no Ray head: Ray alone retries it for many minutes
    and held the driver's exit that long after SIGTERM. Now a bounded wait, then one line; and a
    SIGTERM during that wait ends the command at once."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    code = ("import sys; from sweeper.executors import attached; attached.WAIT_S = 4; "
            "from sweeper.__main__ import main, exit_with; exit_with(main())")
    cmd = [sys.executable, "-c", code, f"results_dir={tmp_path / 'results'}", f"workload.target={T}:quick",
           f"ray.address={address}", "wandb.enabled=false", "history.enabled=false"]
    try:
        started = time.monotonic()
        waited = subprocess.run(cmd, cwd=tmp_path, env=sweeper_env(tmp_path), capture_output=True, text=True,
                                timeout=120)
        took = time.monotonic() - started
        stopped = subprocess.Popen(cmd, cwd=tmp_path, env=sweeper_env(tmp_path), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        signalled = time.monotonic()
        stopped.send_signal(signal.SIGTERM)
        _, err = stopped.communicate(timeout=60)
        ended = time.monotonic() - signalled
    finally:
        listener.close()
    lines = [line for line in waited.stderr.splitlines() if not line.startswith("[20")]   # Ray's own retries
    assert waited.returncode == 2 and lines[-1].startswith(f"error: ray.address={address}: something answers"), \
        waited.stderr[-2000:]
    assert took < 30 and not (tmp_path / "results").exists(), took
    assert stopped.returncode == 130 and ended < 10 and "interrupted" in err.splitlines()[-1], (ended, err[-2000:])


@pytest.mark.parametrize("how", ["executor=ray", "executor=local", "dry_run=true"])
def test_a_temp_folder_without_room_is_one_line_before_ray_starts(how, tmp_path):
    """TMPDIR on a 20 KiB disk: a local Ray started there timed out after 30 s and the traceback
    called it a bug. Now one line naming the folder, at once, exit 74, nothing written."""
    from tests.conftest import in_a_mount_namespace, mount_namespaces

    if not mount_namespaces(tmp_path):
        pytest.skip("needs a mount namespace of its own (unshare --mount, as root) for a small real disk")
    temp = tmp_path / "temp"
    temp.mkdir()
    sweep = (f"TMPDIR={temp} {sys.executable} -m sweeper results_dir={tmp_path / 'results'} workload.target={T}:quick "
             f"wandb.enabled=false history.enabled=false {how}")
    started = time.monotonic()
    result = in_a_mount_namespace(f"mount -t tmpfs -o size=20k tmpfs {temp} && {sweep}", tmp_path)
    assert result.returncode == 74, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"error: {temp}: 20.0 KiB free; a sweep needs 64.0 MiB there (its trials' "
                                          "scratch folders, a local Ray's session): free space, or point TMPDIR "
                                          "(RAY_TMPDIR for Ray alone) at another disk"]
    assert time.monotonic() - started < 20 and not (tmp_path / "results").exists()


def test_a_local_ray_is_the_sweeps_own_beside_a_cluster_started_on_this_machine(tmp_path):
    """`ray start --head` on this machine leaves its address where a bare ray.init() looks, which
    then joined that cluster (and refused the sweep's own settings: a traceback). The sweep starts
    a Ray of its own, and the user's cluster is left running."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")   # short: Ray's socket paths must fit in 107 bytes
    env = {**sweeper_env(tmp_path), "RAY_TMPDIR": temp, "RAY_ADDRESS": "",
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}     # the head ends when told (Ray drains up to 30 s)
    head = subprocess.Popen([ray_bin, "start", "--head", "--block", f"--port={free_port()}", "--num-cpus=1",
                             "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(Path(temp).rglob("ray_current_cluster")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(Path(temp).rglob("ray_current_cluster")), "the cluster did not come up"
        result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
                                 f"workload.target={T}:quick", "workload.seed=0,1", "wandb.enabled=false",
                                 "history.enabled=false", "report.enabled=false"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "on a local Ray" in result.stdout
        assert head.poll() is None and psutil.Process(head.pid).children(recursive=True), "the user's cluster ended"
    finally:
        end_group(head)
        shutil.rmtree(temp, ignore_errors=True)


def held_trials(started: Path, after: int) -> set:
    """The pids of the trials that `quick_announced` holds (hold_after=`after`): all but the first to start."""
    return {int(f.name) for f in sorted(started.iterdir(), key=lambda f: f.stat().st_mtime_ns)[after:]}


def test_a_node_zygote_killed_mid_sweep_takes_down_only_the_trials_it_ran(tmp_path):
    """The kernel's OOM killer picks large processes, and the node's zygote holds torch. The trials
    it was running end as TrialKilled rows that say so; every trial after them runs from a
    zygote of its worker's own (they all failed, ConnectionRefusedError, 10 s each)."""
    started, held = tmp_path / "started", tmp_path / "held"   # 1.2-s trials, then held until the kill
    held.touch()
    cmd = [sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", f"workload.target={T}:quick_announced",
           f"+workload.params.started_dir={started}", "+workload.params.sleep_s=0.3", "workload.steps=4",
           f"+workload.params.held_while={held}", "+workload.params.hold_after=2", "workload.warmup_steps=0",
           "workload.seed=range(0,8)", "resources.isolation=pack", "resources.cpus=1", "wandb.enabled=false",
           "history.enabled=false", "report.enabled=false"]
    driver = subprocess.Popen(cmd, cwd=tmp_path, env=sweeper_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines = lines_until(driver, "[2/8]")       # two trials done; the third and fourth wait in the zygote
    node_zygote = [p for p in psutil.Process(driver.pid).children() if "sweeper._zygote" in title(p)]
    assert len(node_zygote) == 1, lines
    in_zygote = lambda: {c.pid for c in node_zygote[0].children(recursive=True)}   # its fork, then the trial
    wait_for(lambda: held_trials(started, after=2) & in_zygote(), timeout_s=60, poll_s=0.02)
    node_zygote[0].kill()
    held.unlink()
    out, err = driver.communicate(timeout=240)
    assert driver.returncode == 1, "".join(lines) + out[-3000:] + err[-3000:]
    records = read_records(only_run(tmp_path))
    killed = [r for r in records if r["status"] != "ok"]
    assert len(records) == 8 and 1 <= len(killed) <= 2, [(r["status"], r["error_message"]) for r in records]
    assert all(r["error_type"] == "TrialKilled" and "zygote exited while this trial ran" in r["error_message"]
               for r in killed), [(r["error_type"], r["error_message"]) for r in killed]
    assert "\x1b[" not in "".join(lines) + out


def test_a_local_ray_whose_raylet_is_killed_mid_sweep_stops_in_one_line_and_resume_runs_the_rest(tmp_path):
    """The OOM killer takes the sweep's own raylet (a real SIGKILL to that pid, found in the driver's
    process tree). It used to be noticed only after Ray's 15-20 s heartbeat timeout, with Ray's log
    dump twice on the terminal and every trial not yet run written as a failed row."""
    started, held = tmp_path / "started", tmp_path / "held"       # 2-s trials until it goes, before the resume
    held.touch()
    cmd = [sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", f"workload.target={T}:quick_announced",
           f"+workload.params.started_dir={started}", "+workload.params.sleep_s=0.5", "workload.steps=4",
           f"+workload.params.held_while={held}",
           "workload.warmup_steps=0", "workload.seed=range(0,6)", "resources.isolation=pack", "resources.cpus=1",
           "ray.num_cpus=2", "wandb.enabled=false", "history.enabled=false", "report.enabled=false"]
    driver = subprocess.Popen(cmd, cwd=tmp_path, env=sweeper_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines = lines_until(driver, "[1/6]")       # one trial done, and the next ones running
    wait_for(lambda: len(list(started.glob("*"))) >= 3, timeout_s=60)
    tree = psutil.Process(driver.pid).children(recursive=True)
    raylet = named(tree, "raylet")
    assert len(raylet) == 1, lines
    raylet[0].kill()
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 69, "".join(lines) + out[-3000:] + err[-3000:]
    [line] = err.strip().splitlines()
    assert line.startswith("error: the local Ray node stopped mid-sweep (its raylet was killed by SIGKILL"), line
    assert line.endswith("run the command again with resume=latest to run them"), line
    logs = Path(line.split("Ray's logs: ")[1].split(")")[0])
    assert (logs / "logs" / "raylet.out").is_file()                      # kept, for the logs it names
    shutil.rmtree(logs)
    assert "[state-dump]" not in "".join(lines) + out and "\x1b[" not in "".join(lines) + out
    assert zygotes_and_trials_alive([p.pid for p in tree]) == []
    run = only_run(tmp_path)
    rows = {r["trial_id"]: r for r in read_records(run)}
    skipped = json.loads((run / "skipped.json").read_text())
    cut = [r for r in rows.values() if r["status"] != "ok"]
    assert 1 <= len(cut) <= 2 and all(r["error_type"] == "NodeDied" for r in cut), cut   # only what ran
    assert {s["reason"] for s in skipped} == {"node lost"} and len(rows) + len(skipped) == 6
    assert not {s["trial_id"] for s in skipped} & set(rows)
    held.unlink()
    kept = {t: (run / "trials" / t / "trial.json").read_bytes() for t, r in rows.items() if r["status"] == "ok"}
    assert re.search(rf"; {len(kept)} finished trials? (is|are) kept, {len(cut)} trials? it ran (was|were) cut short, "
                     rf"{len(skipped)} did not start;", line), line
    again = subprocess.run(cmd + ["resume=latest"], cwd=tmp_path, env=sweeper_env(tmp_path), capture_output=True,
                           text=True, timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(kept)} trial(s) already finished, {6 - len(kept)} to run" in again.stdout
    assert all(r["status"] == "ok" for r in read_records(run)) and len(read_records(run)) == 6
    assert kept == {t: (run / "trials" / t / "trial.json").read_bytes() for t in kept}
    assert json.loads((run / "skipped.json").read_text()) == []
