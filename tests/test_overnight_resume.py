"""Finishing a night that was cut short (`+sweep=overnight resume=latest`, sweeper/night_resume.py):
which sweeps are kept, resumed or started fresh, the refusals, the dry run, and one real night
stopped during its second sweep and then finished."""
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from sweeper import exitcodes
from sweeper.errors import ConfigError
from sweeper.night_resume import FRESH, KEEP, RESUME, find_night, plan_resume, resumed_manifest, step_of, steps_of
from sweeper.runfolder import RunBusy, writing
from sweeper.schema import RootConfig

ROOT = Path(__file__).resolve().parent.parent
STAMP = "20261202-020000"


def held_after_first(cfg, probe):
    """A workload whose first trial returns at once and whose later ones wait until the test
    leaves `release` in params.gate_dir: the night can be stopped with one trial of the sweep
    finished and the rest missing, however slow the machine is."""
    from tests.workloads_for_tests import quick

    gate = Path(cfg.workload.params["gate_dir"])
    if (gate / "first").exists():
        until = time.time() + 120
        while not (gate / "release").exists() and time.time() < until:
            time.sleep(0.05)
    (gate / "first").touch()
    return quick(cfg, probe)


def entry(name, status, skipped=()):
    return {"name": name, "run": f"{name}/{STAMP}", "status": status, "exit_code": None, "started_at": 1.0,
            "ended_at": None, "skipped_trials": list(skipped)}


def a_night(results: Path, stamp: str, sweeps, planned=("a", "b", "c"), with_trials=()) -> Path:
    night = results / "overnight" / stamp
    night.mkdir(parents=True)
    manifest = {"manifest_version": 1, "suite": "overnight", "night": stamp, "started_at": 1.0, "ended_at": None,
                "budget_s": 60, "deadline": 61.0, "sweeps_planned": list(planned), "sweeps": list(sweeps),
                "alerts": [], "exit_code": None, "command": "python -m sweeper +sweep=overnight"}
    (night / "night.json").write_text(json.dumps(manifest))
    for name, trial_ids in dict(with_trials).items():
        for trial_id in trial_ids:
            folder = night / name / stamp / "trials" / trial_id
            folder.mkdir(parents=True)
            (folder / "trial.json").write_text(json.dumps({"trial_id": trial_id, "status": "ok"}))
    return night


# -- which sweeps run, and how ---------------------------------------------------------------
@pytest.mark.parametrize("status, skipped, has_trials, action", [
    ("ok", (), True, KEEP),
    ("failed trials", (), True, KEEP),                 # its failed trials are rows: it finished
    ("ok", ({"trial_id": "t"},), True, RESUME),        # the deadline kept trials from starting
    ("interrupted", (), True, RESUME),
    ("node lost", (), True, RESUME),
    ("disk full", (), True, RESUME),
    ("running", (), True, RESUME),                     # the suite was SIGKILLed during it
    ("running", (), False, FRESH),                     # ... before its first trial ended
    ("skipped", (), False, FRESH),                     # the budget or a full disk kept it from starting
    ("exit 70", (), True, RESUME),
    (None, (), True, RESUME),                          # no entry, yet its run folder holds trials
    (None, (), False, FRESH),                          # never reached
])
def test_each_sweep_is_kept_resumed_or_started_fresh_by_its_status_and_its_folder(status, skipped, has_trials, action):
    step = step_of("s", entry("s", status, skipped) if status else None, has_trials)
    assert step.action == action


def test_a_night_killed_during_its_second_sweep_resumes_that_one_and_starts_the_third(tmp_path):
    night = a_night(tmp_path, STAMP, [entry("a", "ok"), entry("b", "running")], with_trials={"a": ["x"], "b": ["y"]})
    manifest = json.loads((night / "night.json").read_text())
    steps = plan_resume(manifest, night)
    assert [(s.name, s.action) for s in steps] == [("a", KEEP), ("b", RESUME), ("c", FRESH)]


def test_a_night_with_a_sweep_still_running_is_refused_before_anything(tmp_path):
    """A sweep that outlived its suite (or a second resume) still writes its run folder."""
    night = a_night(tmp_path, STAMP, [entry("a", "ok"), entry("b", "running")], with_trials={"a": ["x"], "b": ["y"]})
    root = SimpleNamespace(sweep=SimpleNamespace(name="overnight"), overnight=SimpleNamespace(sweeps=["a", "b", "c"]))
    with writing(night / "b" / STAMP), pytest.raises(RunBusy, match=f"{night / 'b' / STAMP} is being written"):
        steps_of(root, night)
    assert [s.action for s in steps_of(root, night)[0]] == [KEEP, RESUME, FRESH]


def test_a_resumed_manifest_keeps_the_night_and_counts_its_resumes():
    old = {"night": STAMP, "started_at": 1.0, "sweeps": [entry("a", "ok")], "exit_code": 130, "ended_at": 5.0,
           "alerts_error": "x", "resumed": [{"at": 2.0, "command": "first"}]}
    new = resumed_manifest(old, {"at": 10.0, "command": "again"}, 70.0)
    kept = (new["night"], new["started_at"], new["sweeps"], new["exit_code"], new["ended_at"])
    assert kept == (STAMP, 1.0, [], None, None)
    assert new["resumed"] == [{"at": 2.0, "command": "first"}, {"at": 10.0, "command": "again"}]
    assert new["deadline"] == 70.0 and "alerts_error" not in new


# -- the refusals --------------------------------------------------------------------------
def test_latest_is_the_last_night_folder_with_a_manifest(tmp_path):
    a_night(tmp_path, "20261202-020000", [])
    a_night(tmp_path, "20261202-020000-10", [])
    a_night(tmp_path, "20261202-020000-2", [])
    (tmp_path / "overnight" / "20261203-020000").mkdir()          # no night.json: not a night
    assert find_night(tmp_path / "overnight", "latest", tmp_path).name == "20261202-020000-10"


@pytest.mark.parametrize("resume, says", [
    ("latest", "no night to resume under"),
    ("../elsewhere", "not a path"),
    ("/tmp", "not a path"),
    ("~", "not a path"),
    ("20261202-030000", "is not a night of the suite (no night.json in it)"),
])
def test_a_resume_that_names_no_night_is_one_line(tmp_path, resume, says):
    (tmp_path / "overnight" / "20261202-030000").mkdir(parents=True)    # a folder, but no night
    with pytest.raises(ConfigError, match=None) as caught:
        find_night(tmp_path / "overnight", resume, tmp_path)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def suite_job(tmp_path, *, dry_run=True, resume=None):
    root = RootConfig()
    root.sweep.name, root.results_dir, root.dry_run, root.resume, root.run_id = \
        "overnight", str(tmp_path), dry_run, resume, "20261202-040000"
    root.overnight.sweeps, root.overnight.lock_file = ["a", "b", "c"], str(tmp_path / "lock")
    return SimpleNamespace(config=root, overrides=[f"results_dir={tmp_path}", "executor=local"] +
                           ([f"resume={resume}"] if resume else []))


def fake_sweeps(monkeypatch, returncode=0, stderr=""):
    """subprocess.run of the suite, recording each sweep's command; its dry run lists three trials."""
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, returncode, "dry run: ...\n  x  a=1\n  y  a=2\n  z  a=3\n", stderr)

    monkeypatch.setattr("sweeper.overnight.subprocess.run", run)
    return commands


def test_a_sweeps_failed_dry_run_is_its_own_line_and_code_with_no_plan_over_it(tmp_path, monkeypatch, capsys):
    from sweeper.overnight import run_suite

    fake_sweeps(monkeypatch, returncode=exitcodes.USAGE, stderr="error: resume=latest: no earlier run\n")
    assert run_suite(suite_job(tmp_path)) == exitcodes.USAGE
    out, err = capsys.readouterr()
    assert "dry run" not in out and err.count("error:") == 1


def test_a_resumed_nights_dry_run_says_what_runs_and_passes_each_sweep_its_own_resume(tmp_path, monkeypatch, capsys):
    from sweeper.overnight import run_suite

    a_night(tmp_path, STAMP, [entry("a", "ok"), entry("b", "interrupted")], with_trials={"a": ["x"], "b": ["x"]})
    commands = fake_sweeps(monkeypatch)
    assert run_suite(suite_job(tmp_path, resume="latest")) == exitcodes.OK
    out = capsys.readouterr().out
    assert [c[3] for c in commands] == ["+sweep=b", "+sweep=c"]                  # a finished: not even planned
    assert [c for c in commands[0] if c.startswith("resume=")] == [f"resume={STAMP}"]
    assert not any(c.startswith("resume=") for c in commands[1])                 # c never started: fresh
    assert f"results_dir={tmp_path / 'overnight' / STAMP}" in commands[0]
    assert "dry run: 5 trial(s) to run, nothing launched, no lock taken; resuming night " + STAMP in out
    assert "  a: kept (ok), not run again" in out
    assert "  b: resumed (interrupted): 2 of 3 planned trial(s) missing run" in out
    assert "  c: starts fresh (no entry): 3 trial(s)" in out
    assert not (tmp_path / "lock").exists() and not (tmp_path / "overnight" / "20261202-040000").exists()


def test_a_resume_that_finds_no_night_runs_nothing_and_exits_2(tmp_path, monkeypatch, capsys):
    from sweeper.overnight import run_suite

    commands = fake_sweeps(monkeypatch)
    assert run_suite(suite_job(tmp_path, dry_run=False, resume="latest")) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no night to resume" in err and commands == []
    assert not (tmp_path / "overnight").exists() and not (tmp_path / "lock").exists()


# -- a real night, stopped during its second sweep, then finished ----------------------------------
TOY = """# @package _global_
sweep:
  name: {name}
workload:
  target: {target}
  steps: 2
  warmup_steps: 0
  params:
    gate_dir: {gate}
"""


def _finished_trials(run: Path) -> set:
    """The trials of a run that finished ok (a stopped sweep also writes its cancelled ones)."""
    from sweeper.results import read_records

    return {r["trial_id"] for r in read_records(run) if r["status"] == "ok"}


@pytest.mark.slow
def test_a_night_whose_suite_is_killed_in_its_second_sweep_is_finished_by_resume_latest(tmp_path):
    """The suite alone is SIGKILLed (not its process group): its running sweep stops too,
    keeping what finished, instead of running on unseen into the night a resume then writes."""
    gate = tmp_path / "gate"
    gate.mkdir()
    for name, target in (("first", "tests.workloads_for_tests:quick"),
                         ("second", "tests.test_overnight_resume:held_after_first")):
        (tmp_path / "conf" / "sweep").mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / "sweep" / f"{name}.yaml").write_text(TOY.format(name=name, target=target, gate=gate))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWEEPER_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "sweeper", "+sweep=overnight", "overnight.sweeps=[first,second]", "repeats=3",
           f"results_dir={tmp_path / 'results'}", f"overnight.lock_file={tmp_path / 'lock'}", "overnight.alerts=null",
           "executor=local", "wandb.enabled=false", "report.enabled=false"]
    suite = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    sweep = None
    try:
        nights = tmp_path / "results" / "overnight"
        until = time.time() + 120
        while time.time() < until and not any(_finished_trials(n / "second" / n.name) for n in _listed(nights)):
            time.sleep(0.1)
        sweep = psutil.Process(suite.pid).children()[0]           # the second sweep's later trials wait at the gate
        suite.kill()
        suite.communicate(timeout=60)
        gone, _ = psutil.wait_procs([sweep], timeout=60)
    finally:
        with contextlib.suppress(psutil.Error):                  # a sweep that ran on: not left behind
            for proc in [sweep, *sweep.children(recursive=True)] if sweep and sweep.is_running() else []:
                with contextlib.suppress(psutil.Error):          # ended since it was listed
                    proc.kill()
        suite.kill()
        suite.wait()
    assert gone, "the sweep ran on after its suite was killed"
    night = next(iter(_listed(nights)))
    first_trials = {p: p.stat().st_mtime_ns for p in (night / "first" / night.name / "trials").iterdir()}
    assert len(first_trials) == 3 and len(_finished_trials(night / "second" / night.name)) == 1

    (gate / "release").touch()
    done = subprocess.run(cmd + ["resume=latest"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == exitcodes.OK, done.stdout[-3000:] + done.stderr[-3000:]
    assert _listed(nights) == [night]                                             # no new night folder
    assert "  first: kept (ok), not run again" in done.stdout and "sweep 'first'" not in done.stdout
    assert f"resuming {night / 'second' / night.name}: 1 trial(s) already finished, 2 to run" in done.stdout
    assert {p: p.stat().st_mtime_ns for p in (night / "first" / night.name / "trials").iterdir()} == first_trials
    assert len(_finished_trials(night / "second" / night.name)) == 3
    manifest = json.loads((night / "night.json").read_text())
    assert [(s["name"], s["status"]) for s in manifest["sweeps"]] == [("first", "ok"), ("second", "ok")]
    assert len(manifest["resumed"]) == 1 and manifest["exit_code"] == exitcodes.OK
    assert "resume=latest" in manifest["resumed"][0]["command"] and "resume=" not in manifest["command"]
    history = tmp_path / "results" / "history"
    assert len(list(history.rglob("sweep=first/*.parquet"))) == 1               # appended once, not again


def _listed(nights: Path) -> list:
    return sorted(p for p in nights.iterdir() if p.is_dir()) if nights.is_dir() else []
