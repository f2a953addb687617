"""Start-up and shutdown: what `--help` and a dry run import, Ray started in the background while
the jobs are composed, and a local Ray ended at once, leaving nothing behind."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from sweeper import executors, timeline
from sweeper.schema.run import RayConfig
from tests.conftest import ROOT, checkout_first, named, title

T = "tests.workloads_for_tests"
TINY = [f"workload.target={T}:quick", "workload.steps=1", "workload.warmup_steps=0", "repeats=1",
        "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]


# -- which sweeps start Ray early ---------------------------------------------------------------
@pytest.mark.parametrize("config, expected", [
    ({}, True),                                                   # the default executor is Ray
    ({"executor": "ray", "ray": {"address": "auto"}}, True),      # attaching is started early too
    ({"executor": "local"}, False),
    ({"dry_run": True}, False),
    ({"overnight": {"sweeps": ["dataloader"]}}, False),           # a suite runs each sweep as a process
    ({"overnight": {"sweeps": []}}, True),
])
def test_only_a_sweep_that_will_run_trials_on_ray_starts_it_early(config, expected):
    assert executors.runs_on_ray(config) is expected


class Early:
    """Stands in for RayExecutor: records what is done to it."""
    made = []

    def __init__(self, cfg, preload):
        self.cfg, self.preload, self.calls = cfg, list(preload), []
        Early.made.append(self)

    def begin(self):
        self.calls.append("begin")

    def add_preload(self, modules):
        self.calls.append(("preload", list(modules)))

    def close(self):
        self.calls.append("close")


@pytest.fixture
def early(monkeypatch):
    from sweeper.executors import ray_executor

    Early.made = []
    monkeypatch.setattr(ray_executor, "RayExecutor", Early)
    return Early.made


def root_with(**values):
    from sweeper.schema import root_config_from_dict

    return root_config_from_dict({"workload": {"target": f"{T}:quick"}, **values})


def test_the_sweep_takes_the_executor_begun_early_and_adds_its_workloads_modules(early):
    with executors.head_start():
        executors.begin_early({"ray": {"num_cpus": 2}})           # the first job, checked
        executors.begin_early({"ray": {"num_cpus": 2}})           # no second start for a later one
        assert [e.calls for e in early] == [["begin"]]
        taken = executors.make_executor(root_with(ray={"num_cpus": 2}), ["workloads.dataloader"])
    assert taken is early[0] and taken.cfg == RayConfig(num_cpus=2)
    assert taken.calls == ["begin", ("preload", ["workloads.dataloader"])]      # the sweep closes it, not head_start


def test_a_stop_while_the_sweep_takes_the_early_executor_ends_it(early, monkeypatch):
    """Taken from the head start, it is nobody else's to end (the zygote's socket is retried
    for up to 10 s when its zygote has died)."""
    def stopped(self, modules):
        raise KeyboardInterrupt

    monkeypatch.setattr(Early, "add_preload", stopped)
    with executors.head_start():
        executors.begin_early({})
        with pytest.raises(KeyboardInterrupt):
            executors.make_executor(root_with(), ["workloads.dataloader"])
    assert [e.calls for e in early] == [["begin", "close"]]


def test_an_executor_begun_early_that_no_sweep_took_is_closed(early):
    with executors.head_start():
        executors.begin_early({})
        # a config error in a later job, or in the driver's checks: no sweep takes it
    assert [e.calls for e in early] == [["begin", "close"]]
    with executors.head_start():
        executors.begin_early({"executor": "local"})
    assert len(early) == 1                                # nothing begun for the local executor


def test_a_local_ray_starts_lean_and_ray_is_left_as_it_was(monkeypatch):
    """No API server; the raylet prestarts one worker (the flag says one per CPU), other processes as asked."""
    from ray._private import node, services

    from sweeper.executors.starter import lean_local_start

    started = []
    monkeypatch.setattr(services, "start_ray_process", lambda command, kind, **_: started.append((kind, command)))
    recorder, api_server = services.start_ray_process, node.Node.start_api_server
    with lean_local_start() as prestart:
        assert prestart is True
        assert node.Node.start_api_server(object(), include_dashboard=False, raise_on_failure=False) is None
        services.start_ray_process(["raylet", "--num_prestart_python_workers=16", "--head"], "raylet")
        services.start_ray_process(["gcs_server", "--num_prestart_python_workers=16"], "gcs_server")
    assert started == [("raylet", ["raylet", "--num_prestart_python_workers=1", "--head"]),
                       ("gcs_server", ["gcs_server", "--num_prestart_python_workers=16"])]
    assert node.Node.start_api_server is api_server and services.start_ray_process is recorder
    with lean_local_start(one_worker=False) as prestart:            # a job's runtime_env: no use for it
        assert prestart is False and services.start_ray_process is recorder
    monkeypatch.setattr(services, "start_raylet", lambda *_: None)    # a Ray that passes no such flag
    with lean_local_start() as prestart:
        assert prestart is False and services.start_ray_process is recorder


def test_timeline_marks_are_written_only_where_asked_and_read_back_in_order(tmp_path, monkeypatch):
    from sweeper import timeline

    monkeypatch.delenv(timeline.VARIABLE, raising=False)
    timeline.mark("nowhere")
    path = tmp_path / "marks"
    monkeypatch.setenv(timeline.VARIABLE, str(path))
    timeline.mark("main")
    timeline.mark("trial_start")
    marks = timeline.read(str(path))
    assert [(pid, name) for _, pid, name in marks] == [(os.getpid(), "main"), (os.getpid(), "trial_start")]
    assert marks[0][0] <= marks[1][0] and abs(marks[0][0] - time.time()) < 60
    assert timeline.read(str(tmp_path / "none")) == []


def test_composing_outside_the_launcher_starts_nothing(early):
    executors.begin_early({})                             # a test composing configs, say
    assert early == [] and executors._EARLY is None


def test_an_executor_begun_with_other_ray_settings_is_closed_and_a_new_one_made(early):
    with executors.head_start():
        executors.begin_early({"ray": {"num_cpus": 1}})
        taken = executors.make_executor(root_with(ray={"num_cpus": 2}), [])
    assert early[0].calls == ["begin", "close"]
    assert taken is early[1] and taken.cfg == RayConfig(num_cpus=2) and taken.calls == []


# -- the local Ray ended at once ----------------------------------------------------------------
class Info:
    def __init__(self, process):
        self.process = process


class FakeNode:
    def __init__(self, popens):
        self.all_processes = {"raylet": [Info(popens[0])], "gcs_server": [Info(popens[1])]}

    def is_head(self):
        return True

    def destroy_external_storage(self):
        pass


SLEEPER_WITH_CHILD = ("import subprocess, sys, time; "
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
                      "print('up', flush=True); time.sleep(60)")


@pytest.mark.slow
def test_a_local_ray_is_disconnected_then_its_process_trees_killed_and_reaped(monkeypatch):
    """Ray's own shutdown (its node set) would end each process gracefully and wait; here the
    driver only disconnects, then SIGKILLs the node's processes and what they started."""
    from sweeper.executors import ray_executor

    popens = [subprocess.Popen([sys.executable, "-c", SLEEPER_WITH_CHILD], stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    for proc in popens:
        proc.stdout.readline()                            # its child has started
    tree = [psutil.Process(p.pid) for p in popens]
    tree += [c for p in tree for c in p.children()]
    assert len(tree) == 4

    worker = type(sys)("ray._private.worker")
    worker._global_node = FakeNode(popens)
    seen = []
    ray = type(sys)("ray")
    ray.shutdown = lambda: seen.append(worker._global_node)
    ray._private = type(sys)("ray._private")
    ray._private.worker = worker
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray._private", ray._private)
    monkeypatch.setitem(sys.modules, "ray._private.worker", worker)
    try:
        ray_executor._end_processes(*ray_executor._disconnect_local_ray())
        assert seen == [None]                             # Ray's shutdown found no node of its own to end
        assert [p.returncode for p in popens] == [-signal.SIGKILL] * 2     # reaped, SIGKILLed
        assert [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        for proc in tree:
            try:
                proc.kill()
            except psutil.Error:
                pass


@pytest.mark.slow
def test_a_zygote_imports_the_modules_it_is_sent_before_its_next_fork(tmp_path):
    from sweeper.isolation import ZYGOTE_START_S, _LineReader
    from sweeper.nodezygote import preload_more, start_zygote

    log = open(tmp_path / "zygote.log", "wb")
    proc = start_zygote(str(tmp_path / "z.sock"), stdout=subprocess.PIPE, stderr=log)
    try:
        _LineReader(proc.stdout.fileno()).read(timeout_s=ZYGOTE_START_S)
        preload_more(str(tmp_path / "z.sock"), ["json", "no_such_module_for_the_test"])
        deadline = time.monotonic() + 30
        while b"no_such_module" not in (tmp_path / "zygote.log").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b"zygote: could not preload no_such_module_for_the_test" in (tmp_path / "zygote.log").read_bytes()
        assert proc.poll() is None and psutil.Process(proc.pid).children() == []    # imported, nothing forked
    finally:
        proc.kill()
        proc.wait()
        log.close()


# -- whole commands ----------------------------------------------------------------------------
def imported_modules(args, tmp_path):
    """Modules `python -X importtime -m sweeper ARGS` imported."""
    env = {**os.environ, "PYTHONPATH": checkout_first(), "SWEEPER_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "sweeper", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def imported_packages(args, tmp_path):
    """Top-level packages `python -X importtime -m sweeper ARGS` imported."""
    return {name.split(".")[0] for name in imported_modules(args, tmp_path)}


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["dry_run=true", "workload.seed=0,1"], ["+sweep=train_step", "dry_run=true"],
                                  ["+sweep=overnight", "dry_run=true"]])
def test_help_and_a_dry_run_import_neither_torch_nor_ray(args, tmp_path):
    found = imported_packages([f"results_dir={tmp_path / 'results'}", *args], tmp_path)
    assert "hydra" in found                               # the parse really listed what it imported
    assert {"torch", "ray", "scipy", "wandb", "pandas", "pyarrow"} & found == set()     # pandas: 0.4-0.5 s here


RAY_BEGUN = """
import os, sys, threading
from sweeper.executors import ray_executor
from sweeper.schema.run import RayConfig
seen = []
class Starter:
    def __init__(self, connect):
        seen.append(("ray" in sys.modules, threading.current_thread().name, os.environ.get("RAY_AUTH_MODE")))

    def start(self):
        return self
ray_executor.Starter = Starter
ray_executor.RayExecutor(RayConfig(address="auto"), []).begin()
local = ray_executor.RayExecutor(RayConfig(runtime_env={"env_vars": {"A": "1"}}), [])    # no zygote
local.begin()
local._end(started=True)              # its start is over and started no Ray: the mode goes again
stuck = ray_executor.RayExecutor(RayConfig(runtime_env={"env_vars": {"A": "1"}}), [])
stuck.begin()
stuck._end(started=False)             # its start still under way: the mode stays for the Ray it may start
kept = os.environ.get("RAY_AUTH_MODE")
stuck._end(started=True)
print(seen, kept, os.environ.get("RAY_AUTH_MODE"))
"""


@pytest.mark.slow
def test_ray_is_imported_and_its_token_mode_set_by_the_thread_that_begins_it_before_its_start_thread(tmp_path):
    """Imported in Ray's own thread, beside the driver's imports that follow, it took twice as long
    (Python runs one thread at a time), on Ray's way up. The run's token mode, set from that thread,
    changed the environment while another thread's libraries may read it; an attach sets none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    result = subprocess.run([sys.executable, "-c", RAY_BEGUN], cwd=tmp_path, capture_output=True, text=True,
                            env={**env, "PYTHONPATH": checkout_first()}, timeout=120)
    assert result.stdout.strip() == ("[(True, 'MainThread', None), (True, 'MainThread', 'token'), "
                                     "(True, 'MainThread', 'token')] token None"), result.stderr[-2000:]


@pytest.mark.slow
def test_a_one_trial_run_is_analysed_without_scipy_stats(tmp_path):
    """Its intervals are over its steps (numpy): nothing to test one set of values against another."""
    found = imported_modules([f"results_dir={tmp_path / 'results'}", "executor=local", "workload.steps=20",
                              "workload.target=tests.workloads_for_tests:quick", "wandb.enabled=false",
                              "report.enabled=false", "history.enabled=false"], tmp_path)
    assert "sweeper.analysis.cells" in found and "pandas" in found       # it did analyse the trial
    assert "scipy.stats" not in found
    cells = next((tmp_path / "results").rglob("cells.csv")).read_text().splitlines()
    header, row = cells[0].split(","), cells[1].split(",")
    assert row[header.index("ci_over")] == "steps" and float(row[header.index("p50_low")]) > 0


def test_the_driver_warms_scipy_stats_only_where_the_end_may_compare(tmp_path):
    from sweeper.driver import may_compare
    from tests.test_in_process import jobs_of

    assert not may_compare(jobs_of(tmp_path, [0])[0].config, jobs_of(tmp_path, [0]))
    assert may_compare(jobs_of(tmp_path, [0, 1])[0].config, jobs_of(tmp_path, [0, 1]))
    for values in ({"repeats": 2}, {"repeats": "auto"}, {"history": {"enabled": True}}, {"resume": "latest"}):
        jobs = jobs_of(tmp_path, [0], **values)
        assert may_compare(jobs[0].config, jobs), values


def short_tmp():
    return Path(tempfile.mkdtemp(prefix="su", dir="/tmp"))      # Ray's socket paths live under it


def leftovers(tmp: Path):
    """Processes of the sweep still running: Ray's (their command lines or open files name its
    session under TMPDIR), the node zygote (its socket is under TMPDIR) and the watchdog."""
    from sweeper.rayguard import session_processes

    sessions = list((tmp / "ray").glob("session_2*"))
    found = {p.pid: p for s in sessions for p in session_processes(str(s), [])}
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and any(str(tmp) in arg for arg in proc.cmdline()) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = proc
        except psutil.Error:
            pass
    return sorted(found.values(), key=lambda p: p.pid)


def names(procs):
    out = []
    for proc in procs:
        try:
            out.append(" ".join(proc.cmdline())[:120])
        except psutil.Error:
            pass
    return out


def sweep_env(tmp_path, tmp, **extra):
    return {**os.environ, "PYTHONPATH": checkout_first(), "SWEEPER_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp),
            "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture
def ray_tmp():
    """A short TMPDIR for one sweep (Ray's socket paths live under it); afterwards whatever the
    sweep left there is killed and the folder removed."""
    tmp = short_tmp()
    yield tmp
    end_and_remove(tmp)


def end_and_remove(tmp: Path) -> None:
    """Kills whatever a sweep left under `tmp`, then removes the folder."""
    for proc in leftovers(tmp):
        with contextlib.suppress(psutil.Error):       # it may have ended since it was listed
            proc.kill()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.slow
def test_a_one_trial_ray_sweep_leaves_no_process_of_its_own_when_it_returns(tmp_path, ray_tmp):
    tmp = ray_tmp
    marks = tmp_path / "timeline"
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
                             *TINY], cwd=ROOT, env=sweep_env(tmp_path, tmp, SWEEPER_TIMELINE=str(marks)),
                            capture_output=True, text=True, timeout=300)
    left = leftovers(tmp)                             # at once: nothing is waited for
    assert result.returncode == 0, result.stderr[-3000:]
    stderr = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert "[1/1] ok" in result.stdout and stderr == [], "\n".join(stderr)
    driver_imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in result.stderr.splitlines()
                       if line.startswith("import time:")}
    assert {"ray", "pandas"} <= driver_imported and "torch" not in driver_imported
    assert "on a local Ray" in result.stdout and (tmp / "ray").is_dir(), "the sweep ran on no local Ray under TMPDIR"
    assert [p.name for p in (tmp / "ray").glob("session_*")] == []    # its folder and Ray's link to it: gone
    assert names(left) == []
    assert_phases_in_order(timeline.read(str(marks)), result)


@pytest.mark.slow
def test_a_local_ray_that_lost_a_trial_keeps_its_session_folder_for_its_logs(tmp_path, ray_tmp):
    """A sweep's local Ray is removed with its session folder at the end, unless Ray lost a trial
    (the worker running it killed here): then its logs are what says why."""
    tmp, started = ray_tmp, tmp_path / "started"
    args = [f"workload.target={T}:quick_announced", f"+workload.params.started_dir={started}",
            "+workload.params.sleep_s=1", "workload.steps=20", *TINY[2:]]
    driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *args],
                              cwd=ROOT, env=sweep_env(tmp_path, tmp), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(started.glob("*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    raylet = [p for p in leftovers(tmp) if "raylet/raylet" in title(p)]          # this sweep's Ray
    worker = [p for r in raylet for p in r.children() if title(p).startswith("ray::trial-")]   # runs its trial
    assert len(worker) == 1, names(leftovers(tmp))
    worker[0].kill()
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 1 and "[1/1] failed" in out, out[-2000:] + err[-2000:]
    assert list((tmp / "ray").glob("session_2*/logs/raylet.out")), "the session of a Ray that lost a trial went"
    assert names(leftovers(tmp)) == []


@pytest.mark.slow
def test_a_first_trial_that_asks_for_a_gpu_runs_in_the_one_worker_the_node_started(tmp_path, ray_tmp):
    """Ray binds a worker to the kind of its first task, with a GPU or without, and starts another
    for a task of the other kind (1.7 s on an H200): nothing may run a task of its own on the node's
    one worker before the first trial. A node declared to have a GPU stands in for one."""
    started = tmp_path / "started"
    args = [f"workload.target={T}:quick_announced", "+workload.params.sleep_s=0.3", f"+workload.params.started_dir={started}",
            *TINY[1:], "ray.num_gpus=1", "resources.gpus=1",
            "resources.isolation=gpu", "workload.device=cpu"]
    driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *args],
                              cwd=ROOT, env=sweep_env(tmp_path, ray_tmp), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(started.glob("*")) and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    workers = ray_workers(ray_tmp)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 0 and "[1/1] ok" in out, out[-2000:] + err[-2000:]
    record = json.loads(next((tmp_path / "results").glob("*/*/trials/*/trial.json")).read_text())
    assert workers == [record["worker_pid"]], (workers, record["worker_pid"])


def ray_workers(tmp: Path) -> list:
    """The Python workers of the local Ray under `tmp`: the raylet's children that are neither its
    agents' stand-ins nor anything else of Ray's (a worker running a task is named `ray::<task>`)."""
    return sorted(child.pid for raylet in named(leftovers(tmp), "raylet") for child in raylet.children()
                  if title(child).startswith("ray::") or "default_worker.py " in title(child) + " ")


DRIVER_PHASES = ("main", "first_job_composed", "ray_imported", "ray_ready", "executor_started", "outcome",
                 "trials_done", "executor_closed", "published")
TRIAL_PHASES = ("trial_start", "workload_start", "workload_end", "trial_end")


def assert_phases_in_order(found, result):
    """Every phase mark of a one-trial Ray sweep once, in its order: the driver's from the driver,
    the trial's from another process (the zygote's fork), between the executor's start and the outcome."""
    names = [name for _, _, name in found]
    for phase in (*DRIVER_PHASES, *TRIAL_PHASES, "zygote_ready"):
        assert names.count(phase) == 1, (phase, names)
    at = {name: (when, pid) for when, pid, name in found}
    order = [*DRIVER_PHASES[:5], *TRIAL_PHASES, "outcome", "trials_done"]
    assert [at[p][0] for p in order] == sorted(at[p][0] for p in order), names
    assert at["trials_done"][0] <= min(at["executor_closed"][0], at["published"][0]), names   # side by side
    assert {at[p][1] for p in DRIVER_PHASES} == {at["main"][1]} and at["trial_start"][1] != at["main"][1]


@pytest.mark.slow
def test_ctrl_c_while_ray_starts_ends_what_was_started_with_one_line(tmp_path, ray_tmp):
    tmp = ray_tmp
    driver = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *TINY],
                              cwd=ROOT, env=sweep_env(tmp_path, tmp), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp.glob("ray/session_2*/logs/gcs_server.out")) and time.monotonic() < deadline:
        time.sleep(0.02)                              # Ray's start is under way
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    left = leftovers(tmp)
    assert driver.returncode == 130, err[-3000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("interrupted "), err[-3000:]
    assert names(left) == []


@pytest.mark.slow
def test_a_failed_ray_start_is_one_line_and_leaves_nothing(tmp_path):
    """Ray's own start fails in its thread, after the node zygote has started (a file named `ray` in
    RAY_TMPDIR, where Ray makes its sessions: no check before it knows that; a RAY_TMPDIR that cannot be
    written, or too deep for Ray's sockets, is refused before)."""
    tmp = Path(tempfile.mkdtemp(prefix="su", dir="/tmp"))
    (tmp / "ray").write_text("not a folder\n")
    try:
        result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *TINY],
                                cwd=ROOT, env=sweep_env(tmp_path, tmp, RAY_TMPDIR=str(tmp)),
                                capture_output=True, text=True, timeout=300)
        left = leftovers(tmp)
        assert result.returncode == 2, result.stderr[-3000:]
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"error: {tmp / 'ray'}: File exists"), line
        assert names(left) == [] and [p.name for p in tmp.iterdir()] == ["ray"]
    finally:
        end_and_remove(tmp)


@pytest.mark.slow
def test_a_config_error_in_a_ray_sweep_starts_no_ray(tmp_path, ray_tmp):
    """The first job is composed and checked before Ray starts: bad input costs no Ray start."""
    tmp = ray_tmp
    result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *TINY,
                             "data.batch_size=-4"], cwd=ROOT, env=sweep_env(tmp_path, tmp), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == ["error: data.batch_size: must be positive, got -4"]
    assert not (tmp / "ray").exists() and names(leftovers(tmp)) == []

def test_a_ray_start_that_never_began_is_not_waited_for(monkeypatch, capsys):
    """Held by the executor, then a stop (or a process's thread limit) before its thread started:
    the close waited its whole bound and warned of a start that never was."""
    from sweeper.executors import ray_executor
    from sweeper.executors.starter import Starter

    monkeypatch.setattr(ray_executor, "START_WAIT_S", 5.0)
    executor = ray_executor.RayExecutor(RayConfig(), preload=())
    executor.starter = Starter(lambda: None)
    began = time.monotonic()
    executor.close()
    assert time.monotonic() - began < 1 and capsys.readouterr().err == ""


def test_a_stop_during_a_ray_start_that_never_ends_waits_a_bounded_time_then_says_so(monkeypatch, capsys):
    """A stop that broke an import in Ray's start thread once left that thread, and the close
    that waits for it, stuck for good (the thread blocked on the module lock the import held)."""
    import threading

    from sweeper.executors import ray_executor
    from sweeper.executors.starter import Starter

    stuck = threading.Event()
    monkeypatch.setattr(ray_executor, "START_WAIT_S", 0.2)
    executor = ray_executor.RayExecutor(RayConfig(), preload=())
    executor.starter = Starter(stuck.wait).start()
    try:
        began = time.monotonic()
        executor.close()
        took = time.monotonic() - began
    finally:
        stuck.set()                                # the thread may end now
    assert took < 5
    assert capsys.readouterr().err == ("warning: Ray's start had not finished 0.2 s after the sweep stopped; "
                                       "what it started ends with this process\n")


TWO_RAYS = """
import os
from sweeper.executors.ray_executor import RayExecutor
from sweeper.schema.run import RayConfig

for _ in range(2):                   # a notebook's two sweeps, each on a local Ray of its own
    executor = RayExecutor(RayConfig(), preload=())
    try:
        executor.start()
        during = os.environ.get("RAY_AUTH_MODE")
    finally:
        executor.close()
    print(during, os.environ.get("RAY_AUTH_MODE"), os.environ.get("RAY_AUTH_TOKEN") == os.environ["USERS_TOKEN"])
"""


@pytest.mark.slow
def test_a_process_that_ran_a_local_ray_is_left_without_the_token_mode_the_sweep_set(tmp_path, ray_tmp):
    """The run's own token mode was left in the environment of an in-process caller, whose next
    attach to a cluster without tokens would have been sent it; a token the user set stays."""
    token = secrets.token_hex(32)
    env = {k: v for k, v in sweep_env(tmp_path, ray_tmp, RAY_AUTH_TOKEN=token, USERS_TOKEN=token).items()
           if k != "RAY_AUTH_MODE"}
    result = subprocess.run([sys.executable, "-c", TWO_RAYS], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["token None True"] * 2
    assert names(leftovers(ray_tmp)) == []
