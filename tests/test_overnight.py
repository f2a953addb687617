"""The overnight suite (lock, budget) and the fleet, with real processes.

Toy sweeps live in a conf/ of the test's own folder (the sweeper search-path plugin adds a
./conf), their trials are the sleep workloads of tests/workloads_for_tests.py, so their
speed and noise are set by the test and nothing else.
"""
import json
import secrets
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.conftest import checkout_first, title

from sweeper import exitcodes
from sweeper.plan import ClusterShape, Trial, spread_over_fleet
from sweeper.schema import TrialConfig

ROOT = Path(__file__).resolve().parent.parent

TOY_SLOW = """# @package _global_
sweep:
  name: {name}
workload:
  target: tests.workloads_for_tests:noisy
  steps: 4
  warmup_steps: 0
  params:
    sleep_s: {sleep_s}
    swing: 1
    counter_file: null
hydra:
  sweeper:
    params:
      workload.params.swing: 1,3
"""


def write_conf(folder: Path, name: str, text: str) -> None:
    (folder / "conf" / "sweep").mkdir(parents=True, exist_ok=True)
    (folder / "conf" / "sweep" / f"{name}.yaml").write_text(text)


def sweeper_cmd(tmp: Path, *args: str):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWEEPER_CACHE": str(tmp / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "sweeper", f"results_dir={tmp / 'results'}", "wandb.enabled=false",
           "report.enabled=false", *args]
    return cmd, env


# -- the lock and the budget: two real suites ------------------------------------------
@pytest.mark.slow
def test_second_suite_exits_at_once_naming_the_holder_and_the_budget_lists_what_it_skipped(tmp_path):
    # the first suite: sweep "long" has more trials than its budget allows; "never" comes after it
    write_conf(tmp_path, "long", TOY_SLOW.format(name="long", sleep_s=0.25))
    write_conf(tmp_path, "never", TOY_SLOW.format(name="never", sleep_s=0.01))
    lock = tmp_path / "overnight.lock"
    suite = ["+sweep=overnight", "overnight.sweeps=[long,never]", "overnight.budget_s=9",
             f"overnight.lock_file={lock}", "executor=local", "repeats=4"]
    cmd, env = sweeper_cmd(tmp_path, *suite)
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 30
        while not (lock.exists() and lock.read_text()) and time.time() < deadline:
            time.sleep(0.1)
        assert json.loads(lock.read_text())["pid"] == first.pid

        started = time.monotonic()
        second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        out, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)
            first.wait(timeout=30)

    assert second.returncode == exitcodes.LOCKED
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {first.pid} on {socket.gethostname()}" in lines[0]
    assert "+sweep=overnight" in lines[0] and "started 20" in lines[0]
    assert took < 15, f"the second start took {took:.1f} s"            # at once: no sweep, no trial

    assert first.returncode == exitcodes.OK, out
    night = next((tmp_path / "results" / "overnight").iterdir())
    manifest = json.loads((night / "night.json").read_text())
    long, never = manifest["sweeps"]
    assert never["status"] == "skipped" and "sweep never: not started" in out
    run = night / long["run"]
    finished = json.loads((run / "skipped.json").read_text())
    assert long["skipped_trials"] == finished and len(finished) >= 1      # the budget cut the sweep short
    ran = {p.name for p in (run / "trials").iterdir()}
    assert len(ran) + len(finished) == 2 * 4 + 4                          # 2 cells x 4 repeats + the baseline's 4
    assert not ran & {s["trial_id"] for s in finished}
    assert f"{len(finished)} trial(s) not started" in out
    assert manifest["exit_code"] == exitcodes.OK and manifest["budget_s"] == 9


def test_fleet_puts_one_trial_on_every_gpu_or_every_node():
    shape = ClusterShape(node_cpus=[8, 8], node_gpus=[2, 1], node_ids=["a", "b"])
    gpu = Trial(0, "c-0", [], {}, TrialConfig(), num_gpus=1, cell_id="c")
    cpu = Trial(0, "d-0", [], {}, TrialConfig(), num_gpus=0, cell_id="d")
    spread = spread_over_fleet([gpu, cpu], shape)
    assert [(t.trial_id, t.node, t.group) for t in spread] == [
        ("c-0-n0g0", "a", "c-0"), ("c-0-n0g1", "a", "c-0"), ("c-0-n1g0", "b", "c-0"),
        ("d-0-n0", "a", "d-0"), ("d-0-n1", "b", "d-0")]


# -- the fleet on a real two-node Ray cluster -------------------------------------------
def _ray_node(args, env) -> subprocess.Popen:
    """`ray start --block` in a session of its own: ended by its pid, its node ends with it."""
    return subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--num-cpus=1",
                             "--num-gpus=0", "--node-ip-address=127.0.0.1", *args], env=env, cwd=ROOT,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)      # its own session: only the processes it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _group_left(groups, grace_s: float, stopped_at: float):
    """Processes still in these process groups after `grace_s`: raylets and workers take a few
    seconds to exit after `ray start --block` itself has; what is left then is killed and named.
    Only processes started before `stopped_at` count: once a group is empty its number may be
    reused by an unrelated process (pid_max is 32768 on this machine), which must not be touched."""
    deadline = time.monotonic() + grace_s
    while True:
        left = [p for p in psutil.process_iter()
                if _group_of(p.pid) in groups and _started_before(p, stopped_at) and not _exited(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    named = [f"{p.pid} {_command_of(p)}" for p in left]
    for proc in left:
        try:
            proc.kill()                  # psutil checks the create time first: a reused pid is left alone
        except psutil.Error:
            pass
    return named


def _command_of(proc) -> str:
    return title(proc)[:200] or "(gone)"


def _exited(proc) -> bool:
    """A zombie has exited; it waits only for its parent to reap it (reaped here if that is us)."""
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
        if proc.ppid() == os.getpid():
            os.waitpid(proc.pid, os.WNOHANG)
    except (psutil.Error, ChildProcessError):
        pass
    return True


def _started_before(proc, when: float) -> bool:
    try:
        return proc.create_time() <= when
    except psutil.Error:
        return False


def _group_of(pid: int):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


@pytest.mark.slow
def test_fleet_flags_the_node_made_slow_on_purpose(tmp_path):
    from tests.test_reliability import free_port, wait_for_gcs, wait_for_nodes

    port = free_port()
    address = f"127.0.0.1:{port}"
    # Every Ray process keeps to the loopback address; a token of the test's own lets the driver join.
    # No drain on SIGTERM (Ray waits up to 30 s for one): the nodes end as soon as they are told.
    env = {**os.environ, "PYTHONPATH": checkout_first(), "RAY_ADDRESS": "", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    ray_tmp = tempfile.mkdtemp(prefix="swf", dir="/tmp")     # Ray's socket paths must stay under 107 bytes
    head = _ray_node(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={ray_tmp}"], env)
    slow = None
    try:
        wait_for_gcs(address)                       # the second node may join now
        # the same workload and settings on both nodes; this node's trials sleep 3x as long
        slow = _ray_node([f"--address={address}"], {**env, "SWEEPER_TEST_SLOWDOWN": "3"})
        wait_for_nodes(address, 2, env)
        cmd, _ = sweeper_cmd(tmp_path, f"ray.address={address}", "ray.node_ip_address=127.0.0.1",
                             "resources.every_device=true", "workload.target=tests.workloads_for_tests:sleepy",
                             "workload.steps=5", "workload.warmup_steps=1", "+workload.params.sleep_s=0.01",
                             "repeats=5", "data.batch_size=4", "probe.sample_hz=0")
        done = subprocess.run(cmd, cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
                              timeout=180)
    finally:
        stopping = time.time()
        for node in (slow, head):
            if node is not None:
                _stop(node)
        groups = {node.pid for node in (slow, head) if node is not None}      # each `ray start` its own session
        left = _group_left(groups, grace_s=90, stopped_at=stopping)      # a bound for a loaded machine
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert not left, f"processes of the test's Ray cluster left behind: {left}"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = next((tmp_path / "results" / "single").iterdir())
    fleet = pd.read_csv(run / "fleet.csv")
    records = [json.loads(p.read_text()) for p in run.glob("trials/*/trial.json")]
    slow_node = {r["fingerprint"]["ray_node_id"] for r in records if r["figures"]["sleep_s"] > 0.02}
    assert len(slow_node) == 1 and len(fleet) == 2 and set(fleet["repeats"]) == {5}
    flagged = fleet[fleet["outlier"]]
    assert list(flagged["node"]) == list(slow_node) and flagged["ratio"].iloc[0] < 0.5
    assert fleet["sm_clock_mhz"].isna().all()                           # a CPU fleet: no clocks, NaN
    assert "OUTLIER" in done.stdout and "fleet: each device against its peers" in done.stdout


def test_a_stopped_sweeps_stderr_is_not_passed_on_but_its_warnings_before_are(capsys):
    import io
    import threading

    from sweeper.overnight import _relay_stderr

    stopping = threading.Event()
    _relay_stderr(io.StringIO("warning: a loader setting\ninterrupted while ...\n"), stopping)
    stopping.set()
    _relay_stderr(io.StringIO("error: what a sweep cut short in its start may print\n"), stopping)
    assert capsys.readouterr().err == "warning: a loader setting\n"


@pytest.mark.slow
def test_the_shipped_suite_dry_runs_each_of_its_sweeps(tmp_path):
    cmd, env = sweeper_cmd(tmp_path, "+sweep=overnight", "dry_run=true", "data.num_workers=2")
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    heads = [line for line in done.stdout.splitlines() if line.startswith("dry run: ")]
    assert heads[0].startswith("dry run: 34 trial(s) of sweep 'overnight' (dataloader 10, train_step 14, "
                               "playbook 10, in turn)")
    loader, step, playbook = heads[1:]
    # the suite's repeats=auto reaches each sweep (its first round: 2 repeats, the baseline 4), and
    # so do the user's overrides: data.num_workers=2 replaces the loader's four values (2 x 2 cells)
    assert "10 trial(s) of sweep 'dataloader'" in loader
    assert "14 trial(s) of sweep 'train_step'" in step
    assert "10 trial(s) of sweep 'playbook'" in playbook      # five workloads, each alone: no baseline doubled
    # trial lines name measurement settings only: the suite's run-control keys stay off them
    trial_lines = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert not any("repeats=" in line for line in trial_lines) and not (tmp_path / "overnight.lock").exists()
    assert "repeats=auto: these are the first round" in done.stdout


def test_fleet_keys_gpu_trials_by_uuid_and_puts_the_clocks_beside_the_slow_one():
    from sweeper.analysis.fleet import fleet_table
    from sweeper.schema import AnalysisConfig

    records, rates = [], []
    for g, (speed, clock) in enumerate([(100.0, 1980.0), (101.0, 1980.0), (70.0, 1400.0)]):   # GPU 2 throttles
        for r in range(6):
            trial = f"c-{r}-n0g{g}"
            records.append({"trial_id": trial, "cell_id": "c", "status": "ok", "resources": {"num_gpus": 1},
                            "fingerprint": {"host": "h", "ray_node_id": "node-a", "gpu_uuid": f"GPU-{g}"},
                            "summary": {"gpu_sm_clock_mhz_mean": clock, "gpu_temp_c_mean": 60 + 20 * (g == 2),
                                        "gpu_power_w_mean": 500.0}})
            rates.append({"trial_id": trial, "items_per_s": speed * (1 + 0.002 * r)})
    fleet = fleet_table(records, pd.DataFrame(rates), AnalysisConfig()).set_index("device")
    assert list(fleet.index) == ["GPU-0", "GPU-1", "GPU-2"] and set(fleet["node"]) == {"node-a"}
    assert list(fleet["outlier"]) == [False, False, True]
    assert fleet.loc["GPU-2", "sm_clock_mhz"] == 1400.0 and fleet.loc["GPU-2", "temp_c"] == 80.0
    assert fleet.loc["GPU-2", "ratio"] < 0.75 and fleet.loc["GPU-2", "p_adj"] < 0.05


@pytest.mark.slow
def test_a_night_whose_disk_fills_starts_no_sweep_after_it(tmp_path):
    """A sweep that ran out of space (exit 74) ends the night's sweeps: each later one would fail
    the same way, and the night's own record needs the room. A real 120 KiB disk."""
    from tests.conftest import in_a_mount_namespace, mount_namespaces

    if not mount_namespaces(tmp_path):
        pytest.skip("needs a mount namespace of its own (unshare --mount, as root) for a small real disk")
    for name in ("fills", "after"):
        write_conf(tmp_path, name, TOY_SLOW.format(name=name, sleep_s=0.01))
    cmd, env = sweeper_cmd(tmp_path, "+sweep=overnight", "overnight.sweeps=[fills,after]", "executor=local",
                           "repeats=4", f"overnight.lock_file={tmp_path / 'lock'}", "history.enabled=false")
    results = tmp_path / "results"
    results.mkdir()
    script = (f"mount -t tmpfs -o size=120k tmpfs {results} && " + " ".join(f"'{a}'" for a in cmd) +
              f" >out.txt 2>err.txt; echo $?; echo ---; cat err.txt; echo ---; cat {results}/overnight/*/night.json")
    result = in_a_mount_namespace(script, tmp_path)
    code, err, night = result.stdout.split("---\n")
    assert code.strip() == "74", result.stdout[-3000:] + result.stderr[-2000:]
    assert "disk full: a sweep before it ran out of space; sweep 'after' not started" in err.splitlines(), err
    manifest = json.loads(night)
    assert [(s["name"], s["status"]) for s in manifest["sweeps"]] == [("fills", "disk full"), ("after", "skipped")]
