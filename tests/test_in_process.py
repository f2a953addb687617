"""The logic of the modules that usually run in other processes (the trial, the host that collects
it, the zygote, the entry point, the overnight lock, the Ray watchdog, the report command), run here
in this process, so the fast lane exercises them; the slow tests run them as the real processes."""
import json
import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import psutil
import pytest

from sweeper import exitcodes

DATA = Path(__file__).parent / "data"


def spec_for(target, steps=3, warmup=1, **params):
    """The spec the driver sends for one trial of `target` (through plan_trials and Trial.spec)."""
    from sweeper.plan import ClusterShape, plan_trials
    from sweeper.schema import root_config_from_dict

    root = root_config_from_dict({"workload": {"target": target, "steps": steps, "warmup_steps": warmup,
                                               "params": params},
                                  "resources": {"isolation": "pack", "cpus": 1}, "wandb": {"enabled": False},
                                  "run_id": "here"})
    trial = plan_trials([([], root)], ClusterShape([2.0], [0.0]))[0]
    return trial.spec(root.sweep.name, root.run_id, os.getpid())


@pytest.fixture
def no_git(monkeypatch):
    """The fingerprint without its `git rev-parse`: no process is started here."""
    import sweeper.fingerprint

    monkeypatch.setattr(sweeper.fingerprint, "fingerprint", lambda *a, **k: {"host": "here"})


def test_a_trial_runs_here_and_leaves_its_record_and_steps(tmp_path, no_git):
    from sweeper.isolation import collect
    from sweeper.trial import RECORD_FILE, STEPS_FILE, execute

    spec = spec_for("tests.workloads_for_tests:quick", steps=3, warmup=1, sleep_s=0.0)
    record = execute(spec, tmp_path)
    assert record.status == "ok" and record.figures["custom_figure"] == 42.0 and record.summary["steps"] == 3
    steps = pd.read_parquet(tmp_path / STEPS_FILE)
    assert len(steps) == 4 and steps["warmup"].tolist() == [True, False, False, False]
    assert json.loads((tmp_path / RECORD_FILE).read_text())["trial_id"] == spec["trial_id"]

    outcome = collect(spec, tmp_path, 0, "ok", 60)           # what the host hands back to the driver
    assert outcome.record.status == "ok" and set(outcome.files) == {STEPS_FILE}


def test_a_trial_after_the_commands_start_runs_its_workload_under_the_processs_own_thresholds(tmp_path, no_git,
                                                                                               monkeypatch):
    """The command widens the collector's young generation for its imports (sweeper/youngcollector.py);
    a trial in its process (executor=local) must give the workload the thresholds it started with."""
    import gc

    from sweeper import youngcollector
    from sweeper.trial import execute

    monkeypatch.setattr(youngcollector, "_original", None)     # as in a process that has not started yet
    before = gc.get_threshold()
    youngcollector.widen_for_start()
    try:
        assert gc.get_threshold()[0] > before[0]       # what the start runs under
        record = execute(spec_for("tests.workloads_for_tests:quick", steps=1, warmup=0, sleep_s=0.0), tmp_path)
    finally:
        youngcollector.restore()
    assert record.figures["gc_young_threshold"] == before[0] and gc.get_threshold() == before


def test_a_raising_workload_is_a_failed_record_not_an_exception(tmp_path, no_git):
    from sweeper.trial import execute

    record = execute(spec_for("tests.workloads_for_tests:raises"), tmp_path)
    assert (record.status, record.error_type) == ("failed", "ValueError")
    assert record.error_message == "injected failure for the test"


@pytest.mark.parametrize("status, code, error, words", [
    ("timeout", None, "TrialTimeout", "ran past resources.timeout_s=7 s"),
    ("failed", -signal.SIGKILL, "TrialKilled", "killed by SIGKILL"),
    ("failed", 3, "TrialCrashed", "exited with code 3 and left no record"),
    ("ok", 0, "TrialCrashed", "exited with code 0 and left no record"),     # ok, yet no record: a crash
])
def test_a_trial_that_left_no_record_is_a_row_that_says_why(tmp_path, status, code, error, words):
    from sweeper.isolation import collect
    from sweeper.trial import LOG_FILE

    (tmp_path / LOG_FILE).write_text("".join(f"line {i}\n" for i in range(100)))
    outcome = collect(spec_for("tests.workloads_for_tests:quick"), tmp_path, code, status, 7)
    record = outcome.record
    assert record.error_type == error and words in record.error_message
    assert record.status == ("timeout" if status == "timeout" else "failed")
    assert record.log_tail.splitlines()[-1] == "line 99" and "line 0\n" not in record.log_tail


def test_zygote_socket_names_and_abstract_ones():
    from sweeper.nodezygote import socket_address

    assert socket_address("/tmp/z.sock") == "/tmp/z.sock"
    assert socket_address("@sweeper-zygote-1") == "\0sweeper-zygote-1"


def test_shard_patterns_reach_hydra_quoted():
    from sweeper.__main__ import quote_shard_patterns

    argv = ["prog", "data.url=/d/train-{0000..0009}.tar", "+data.url=/d/{a,b}.tar", "data.url='/d/{0..1}.tar'",
            "data.batch_size=8,16", "other={x: 1}"]
    assert quote_shard_patterns(argv) == ["prog", "data.url='/d/train-{0000..0009}.tar'", "+data.url='/d/{a,b}.tar'",
                                          "data.url='/d/{0..1}.tar'", "data.batch_size=8,16", "other={x: 1}"]


def test_another_launcher_is_refused_with_what_to_use(capsys, monkeypatch):
    from sweeper.__main__ import run_in_process

    monkeypatch.setattr(exitcodes, "_code", exitcodes.OK)
    run_in_process(None)
    assert "use executor=local" in capsys.readouterr().err and exitcodes.code() == exitcodes.USAGE
    exitcodes.report(exitcodes.TRIALS_FAILED)             # the worst code wins, whatever came later
    exitcodes.report(exitcodes.INTERRUPTED)
    assert exitcodes.code() == exitcodes.INTERRUPTED


def test_the_overnight_lock_names_its_holder_and_passes_on_only_the_users_settings(tmp_path):
    from sweeper.overnight import passed_on
    from sweeper.suitelock import LockHeld, describe_holder, take_lock

    holder = {"pid": 12, "host": "box", "started": "2026-12-01T02:00:00Z", "command": "python -m sweeper"}
    handle = take_lock(tmp_path / "lock", holder)
    try:
        with pytest.raises(LockHeld, match=r"holds .*lock: pid 12 on box, started 2026-12-01T02:00:00Z"):
            take_lock(tmp_path / "lock", {**holder, "pid": 13})
    finally:
        handle.close()
    take_lock(tmp_path / "lock", holder).close()          # free again once the holder closed it
    assert describe_holder("") == "a process that has not written its name yet"
    assert passed_on(["executor=local", "+sweep=overnight", "overnight.budget_s=5", "run_id=x", "ray.address=auto",
                      "hydra.sweep.dir=/x", "repeats=4", "sequential.max_repeats=4"]) == ["executor=local", "ray.address=auto"]


class FakeProcess:
    def __init__(self, cmdline, files=()):
        self._cmdline, self._files = cmdline, [SimpleNamespace(path=p) for p in files]

    def cmdline(self):
        return self._cmdline

    def open_files(self):
        return self._files


def test_the_ray_watchdog_tells_its_sessions_processes_from_another_sessions():
    from sweeper.rayguard import _of_session

    session = "/tmp/ray/session_2026-12-01_17-00-00_1"
    assert _of_session(FakeProcess(["raylet", f"--session_dir={session}"]), session)
    assert _of_session(FakeProcess(["ray::IDLE"], [f"{session}/logs/worker.out"]), session)
    assert not _of_session(FakeProcess(["raylet", f"--session_dir={session}0"]), session)     # a name alike
    assert not _of_session(FakeProcess(["ray::IDLE"], [f"{session}0/logs/worker.out"]), session)
    assert not _of_session(FakeProcess(["python", "train.py"]), session)


def test_the_report_command_analyses_a_run_once_and_writes_everything(tmp_path, capsys):
    from sweeper.report.__main__ import main

    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    assert main([str(run), "--metric", "p50"]) == 0
    out = capsys.readouterr().out
    assert "| cell | repeats | items/s | p50 ms | p95 ms | p50 ratio |" in out
    assert out.rstrip().endswith(f"report: {run / 'report.html'}")
    assert (run / "cells.parquet").exists() and (run / "report.md").exists()
    assert main([str(tmp_path)]) == 2 and capsys.readouterr().err.startswith(f"error: {tmp_path} is not a run folder")


class FakeTree:
    """A psutil.Process with children; kill() makes it a zombie; a vanished one raises."""
    def __init__(self, pid, children=(), gone=False):
        self.pid, self.kids, self.gone, self.state = pid, list(children), gone, "running"

    def children(self, recursive=False):
        return [d for c in self.kids for d in ([c, *c.children(True)] if recursive else [c])]

    def kill(self):
        import psutil

        if self.gone:
            raise psutil.NoSuchProcess(self.pid)
        self.state = psutil.STATUS_ZOMBIE

    def status(self):
        return self.state


def test_containment_ends_only_what_appeared_and_a_whole_tree(monkeypatch):
    import psutil

    from sweeper import containment

    old, grandchild = FakeTree(900001), FakeTree(900004)
    new, gone = FakeTree(900002, [grandchild]), FakeTree(900003, gone=True)
    me = FakeTree(os.getpid(), [old, new, gone])
    monkeypatch.setattr(containment.psutil, "Process", lambda *a: me)
    assert containment.descendants() == {900001, 900002, 900003, 900004}
    ended = containment.end_new_descendants({old.pid}, deadline_s=5)
    assert sorted(ended) == [900002, 900003, 900004]               # the vanished one is passed over, not fatal
    assert old.state == "running" and new.state == grandchild.state == psutil.STATUS_ZOMBIE
    assert not containment.running(new) and containment.running(old)

    tree = FakeTree(900010, [FakeTree(900011, [FakeTree(900012)])])
    containment.kill_tree(tree)
    assert [p.state for p in (tree, *tree.children(recursive=True))] == [psutil.STATUS_ZOMBIE] * 3


class FakeRay:
    """The few calls the Ray executor makes, recorded; `nodes` as ray.nodes() gives them."""
    class exceptions:
        class RayError(Exception):
            pass

    class runtime_env:
        class RuntimeEnv(dict):       # Ray's validator; the fake takes any runtime_env
            pass

    def __init__(self, nodes):
        self._nodes, self.calls = nodes, []

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))

    def nodes(self):
        return self._nodes

    def remote(self, **decorator):
        ray = self

        class Task:
            def options(self, **options):
                ray.calls.append(("options", options))
                return SimpleNamespace(remote=lambda *args: ("handle", args))
        return lambda fn: Task()

    def wait(self, handles, num_returns, timeout):
        return handles[:num_returns], handles[num_returns:]

    def get(self, handle, timeout):
        raise self.exceptions.RayError("the node died")

    def cancel(self, handle, force):
        self.calls.append(("cancel", handle, force))

    def shutdown(self):
        self.calls.append(("shutdown",))


def test_the_ray_executor_on_a_cluster_it_attached_to(monkeypatch):
    import sys

    from sweeper.executors.base import TrialLost
    from sweeper.executors.ray_executor import RayExecutor
    from sweeper.plan import ClusterShape, plan_trials
    from sweeper.schema import root_config_from_dict
    from sweeper.schema.run import RayConfig

    ray = FakeRay([{"NodeID": "b", "Alive": True, "Resources": {"CPU": 8.0, "GPU": 2.0}},
                   {"NodeID": "a", "Alive": True, "Resources": {"CPU": 4.0}},
                   {"NodeID": "c", "Alive": False, "Resources": {"CPU": 64.0}}])
    monkeypatch.setitem(sys.modules, "ray", ray)
    executor = RayExecutor(RayConfig(address="auto", runtime_env={"pip": ["x"]}), preload=())
    shape = executor.start()                                  # attaches: no local Ray, no zygote here
    assert (shape.node_ids, shape.node_cpus, shape.node_gpus) == (["a", "b"], [4.0, 8.0], [0.0, 2.0])
    assert ray.calls[0] == ("init", {"include_dashboard": False, "logging_level": 30, "log_to_driver": False,
                                     "runtime_env": {"pip": ["x"]}, "address": "auto"})
    assert executor.describe(shape).startswith("Ray at auto (")

    root = root_config_from_dict({"workload": {"target": "tests.workloads_for_tests:quick"},
                                  "resources": {"cpus": 3, "timeout_s": 40}, "run_id": "r"})
    trial = plan_trials([([], root)], ClusterShape([4.0, 8.0], [0.0, 2.0], ["a", "b"]))[0]
    handle = executor.submit(trial, {"trial_id": trial.trial_id})
    assert ray.calls[-1] == ("options", {"num_cpus": trial.num_cpus, "num_gpus": trial.num_gpus, "max_retries": 0,
                                         "name": f"trial-{trial.trial_id}"})    # the plan's request, as it is
    assert handle == ("handle", ({"trial_id": trial.trial_id}, 40.0, None))
    assert executor.wait([handle, "other"], 1.0) == [handle] and executor.wait([], 1.0) == []
    with pytest.raises(TrialLost, match="the node died"):
        executor.outcome(handle)
    executor.cancel([handle])
    executor.close()                                          # not ours to shut down
    assert ray.calls[-1] == ("cancel", handle, True) and ("shutdown",) not in ray.calls


def jobs_of(tmp_path, seeds, **values):
    """The jobs Hydra's launcher hands over for workload.seed=SEEDS (one trivial workload)."""
    from sweeper.schema import root_config_from_dict
    from sweeper.sweep import Job

    jobs = []
    for seed in seeds:
        config = {"results_dir": str(tmp_path / "results"), "run_id": "r1", "wandb": {"enabled": False},
                  "report": {"enabled": False}, "history": {"enabled": False},
                  "workload": {"target": "tests.workloads_for_tests:quick", "seed": seed}, **values}
        jobs.append(Job([f"workload.seed={seed}"], root_config_from_dict(config), config))
    return jobs


def test_the_entry_runs_a_sweep_to_its_end_and_refuses_a_grid_of_suites(tmp_path, monkeypatch, capsys):
    from sweeper import driver
    from sweeper.entry import run_jobs
    from tests.fake_executor import FakeExecutor

    monkeypatch.setattr(driver, "make_executor", lambda root, preload: FakeExecutor())
    assert run_jobs(jobs_of(tmp_path, [0, 1]), "multirun: true\n") == exitcodes.OK
    out = capsys.readouterr().out                       # the end of the sweep: the real views of the analysis
    assert "[2/2] ok" in out and "verdicts against the baseline:" in out and "recommended: keep the baseline" in out
    assert (tmp_path / "results" / "single" / "r1" / "summary.parquet").exists()

    suites = jobs_of(tmp_path, [0, 1], overnight={"sweeps": ["dataloader"]})
    assert run_jobs(suites) == exitcodes.USAGE
    assert capsys.readouterr().err.startswith("error: overnight.sweeps: a suite takes single values")


def test_publishing_finds_the_key_the_run_ids_and_only_this_sweeps_offline_runs(tmp_path, monkeypatch):
    from sweeper import publish
    from sweeper.results import read_records

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example:8443/")
    (tmp_path / "netrc").write_text("machine wandb.example login user password KEY-FROM-NETRC\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert publish.base_url() == "https://wandb.example:8443" and publish.api_key() == "KEY-FROM-NETRC"
    monkeypatch.setenv("WANDB_API_KEY", "KEY-FROM-ENV")
    assert publish.api_key() == "KEY-FROM-ENV"

    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    records = read_records(run)
    ids = publish.run_ids(run, records)
    assert set(ids) == {r["trial_id"] for r in records} | {"summary"} and len(set(ids.values())) == len(ids)
    mine = run / "wandb" / f"offline-run-20261201_120000-{ids['summary']}"
    other = run / "wandb" / "offline-run-20261201_120000-another-sweep-summary"
    for folder in (mine, other):
        folder.mkdir(parents=True)
    assert publish.offline_dirs(run, ids) == [mine]


@pytest.mark.slow      # forks a process that double-forks an orphan
def test_an_in_process_sweep_leaves_this_process_as_it_found_it():
    """executor=local makes this process a child subreaper for the sweep (a trial's daemons come
    back to it); after the sweep it is not one any more, and the orphans it adopted are reaped."""
    from sweeper.containment import is_child_subreaper
    from sweeper.executors.local import LocalExecutor

    assert not is_child_subreaper()
    ours = {p.pid for p in psutil.Process().children()}
    executor = LocalExecutor()
    executor.start()
    assert is_child_subreaper()
    middle = os.fork()
    if middle == 0:                       # an orphan: its parent exits at once, it ends soon after
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 10
    while not [p for p in psutil.Process().children() if p.pid not in ours and p.status() == psutil.STATUS_ZOMBIE]:
        assert time.monotonic() < deadline, "the orphan never came back to this process"
        time.sleep(0.01)
    executor.close()
    assert not is_child_subreaper()
    assert {p.pid for p in psutil.Process().children()} - ours == set()
