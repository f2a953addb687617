"""The sweep driver in-process, with an executor that runs nothing (tests/fake_executor.py):
retries, OOM shrinking, timeouts, cancel, resume, the window, the deadline, the run folder
and signals, each in well under a second."""
import itertools
import json
import os
import signal
import threading
import time

import pandas as pd
import pytest

from sweeper import driver, exitcodes
from sweeper.errors import ConfigError
from sweeper import sweep as sweep_module
from sweeper.results import read_records
from sweeper.runfolder import RunBusy, check_free, writing
from sweeper.schema import root_config_from_dict
from sweeper.sweep import Job
from tests.fake_executor import FakeExecutor

T = "tests.workloads_for_tests:quick"


def nested(dotted):
    out = {}
    for key, value in dotted.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def jobs_for(tmp_path, grid=None, **settings):
    """The jobs Hydra's launcher would hand over for `grid` ({dotted key: [values]}) and settings."""
    grid = grid or {"workload.seed": [0, 1]}
    base = {"results_dir": str(tmp_path / "results"), "run_id": "r1", "workload.target": T,
            "wandb.enabled": False, "report.enabled": False, "history.enabled": False, **settings}
    jobs = []
    for point in itertools.product(*grid.values()):
        swept = dict(zip(grid, point))
        values = nested({**base, **swept})
        jobs.append(Job([f"{k}={v}" for k, v in swept.items()], root_config_from_dict(values), values))
    return jobs


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    """run(script, grid, **settings) -> (exit code, the fake executor); the end of the sweep is
    a stand-in that says whether every trial ended ok (the views have tests of their own)."""
    ends = []

    def publish_end(sweep, root, run):
        ends.append(run)
        return exitcodes.TRIALS_FAILED if any(r.status != "ok" for r in sweep.records.values()) else exitcodes.OK

    monkeypatch.setattr(driver, "publish_end", publish_end)

    def run(script=lambda spec, attempt: "ok", grid=None, shape=None, **settings):
        executor = FakeExecutor(script, **({"shape": shape} if shape else {}))
        monkeypatch.setattr(driver, "make_executor", lambda root, preload: executor)
        run.ends = ends
        return driver.run_sweep(jobs_for(tmp_path, grid, **settings), "multirun: true\n"), executor

    return run


def records(tmp_path, run_id="r1"):
    return {r["trial_id"]: r for r in read_records(tmp_path / "results" / "single" / run_id)}


def once(action):
    """A script event that happens the first time the trial is waited for, and not again."""
    done = []

    def event():
        if not done:
            done.append(1)
            action()
    return event


# -- trials: retries, OOM, timeouts -----------------------------------------------------
def test_a_killed_trial_is_retried_up_to_max_retries_and_then_is_a_row(sweep, tmp_path):
    code, fake = sweep(lambda spec, attempt: "killed" if attempt < 3 else "ok", grid={"workload.seed": [0]},
                       **{"resources.max_retries": 1})
    (record,) = records(tmp_path).values()
    assert (code, record["status"], record["error_type"], record["attempts"]) == (1, "failed", "TrialKilled", 2)
    assert len(fake.submitted) == 2


def test_a_trial_lost_with_its_node_runs_again_and_keeps_its_id(sweep, tmp_path):
    code, fake = sweep(lambda spec, attempt: "lost" if attempt == 1 else "ok", grid={"workload.seed": [0]},
                       **{"resources.max_retries": 1})
    (record,) = records(tmp_path).values()
    assert (code, record["status"], record["attempts"]) == (0, "ok", 2)


def test_a_failed_trial_is_a_row_and_is_not_retried(sweep, tmp_path):
    code, fake = sweep(lambda spec, attempt: "failed" if spec["swept"]["workload.seed"] == 1 else "ok",
                       **{"resources.max_retries": 3})
    statuses = sorted(r["status"] for r in records(tmp_path).values())
    assert (code, statuses, len(fake.submitted)) == (1, ["failed", "ok"], 2)


def test_out_of_memory_halves_the_batch_until_it_fits_and_keeps_every_attempt(sweep, tmp_path):
    def script(spec, attempt):
        return "oom" if spec["config"].data.batch_size > 4 else "ok"

    code, _ = sweep(script, grid={"data.batch_size": [16]}, **{"resources.on_oom": "halve"})
    found = records(tmp_path)
    sizes = {tid: r["config"]["data"]["batch_size"] for tid, r in found.items()}
    assert sorted(sizes.values()) == [4, 8, 16]
    by_size = {size: found[tid] for tid, size in sizes.items()}
    assert [by_size[s]["status"] for s in (16, 8, 4)] == ["oom", "oom", "ok"]
    assert by_size[8]["retry_of"] == by_size[16]["trial_id"] and by_size[4]["retry_of"] == by_size[8]["trial_id"]
    assert code == exitcodes.TRIALS_FAILED


def test_a_run_with_halved_retries_resumes_and_a_new_cell_after_them_runs(sweep, tmp_path):
    """The retries that halved a trial measure cells the grid does not plan (batch 8, 4): they are
    the trial's own, not settings the resume changed."""
    def script(spec, attempt):
        return "oom" if spec["config"].data.batch_size > 4 else "ok"

    sweep(script, grid={"data.batch_size": [16]}, **{"resources.on_oom": "halve"})
    code, fake = sweep(script, grid={"data.batch_size": [16, 2]}, resume="latest", **{"resources.on_oom": "halve"})
    assert code == exitcodes.TRIALS_FAILED   # the oom rows run again, halving again; batch 2 is new
    assert sorted(s["config"].data.batch_size for s in fake.submitted) == [2, 4, 8, 16]


def test_out_of_memory_without_on_oom_is_one_row(sweep, tmp_path):
    code, fake = sweep(lambda spec, attempt: "oom", grid={"data.batch_size": [16]})
    assert [r["status"] for r in records(tmp_path).values()] == ["oom"] and len(fake.submitted) == 1


def test_a_timeout_is_a_row_named_so_and_is_not_retried(sweep, tmp_path):
    code, fake = sweep(lambda spec, attempt: "timeout", grid={"workload.seed": [0]}, **{"resources.max_retries": 2})
    (record,) = records(tmp_path).values()
    assert (code, record["status"], record["error_type"], len(fake.submitted)) == (1, "timeout", "TrialTimeout", 1)


def test_a_request_no_node_can_hold_is_an_infeasible_row_and_never_submitted(sweep, tmp_path):
    code, fake = sweep(grid={"workload.seed": [0]}, **{"resources.gpus": 1})
    (record,) = records(tmp_path).values()
    assert (code, record["status"], fake.submitted) == (exitcodes.TRIALS_FAILED, "infeasible", [])
    assert "asks for 1 GPU(s) but no node has more than 0" in record["error_message"]


# -- the window and the deadline --------------------------------------------------------
def test_without_a_deadline_every_trial_is_submitted_at_once(sweep):
    _, fake = sweep(grid={"workload.seed": list(range(6))})
    assert fake.most_waiting == 6


def test_with_a_deadline_only_as_many_trials_wait_as_the_cluster_holds(sweep):
    # two CPUs, a CPU each: two at a time, so the deadline can still keep the rest from starting
    _, fake = sweep(grid={"workload.seed": list(range(6))}, **{"overnight.deadline": time.time() + 3600,
                                                                "resources.isolation": "pack", "resources.cpus": 1})
    assert fake.most_waiting == 2 and len(fake.submitted) == 6


def test_past_the_deadline_nothing_starts_and_skipped_json_lists_every_trial(sweep, tmp_path, capsys):
    code, fake = sweep(grid={"workload.seed": [0, 1, 2]}, **{"overnight.deadline": time.time() - 1})
    skipped = json.loads((tmp_path / "results" / "single" / "r1" / "skipped.json").read_text())
    assert fake.submitted == [] and len(skipped) == 3 and {s["reason"] for s in skipped} == {"deadline"}
    assert "the deadline passed; 3 trial(s) not started" in capsys.readouterr().err


# -- cancel and resume -------------------------------------------------------------------
def test_ctrl_c_cancels_what_runs_keeps_what_finished_and_exits_130(sweep, tmp_path, capsys):
    order = []
    fired = []

    def script(spec, attempt):
        order.append(spec["trial_id"])
        if len(set(order)) == 3 and not fired:
            fired.append(1)
            return lambda: os.kill(os.getpid(), signal.SIGINT)
        return "ok"

    code, fake = sweep(script, grid={"workload.seed": list(range(5))})
    found = records(tmp_path)
    statuses = sorted(r["status"] for r in found.values())
    assert code == exitcodes.INTERRUPTED
    assert statuses == ["cancelled"] * 3 + ["ok"] * 2
    assert sorted(fake.cancelled) == sorted(t for t, r in found.items() if r["status"] == "cancelled")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted while trials ran") and "resume=latest" in err[0]
    assert fake.closed


def test_a_second_ctrl_c_while_the_trials_are_cancelled_adds_no_line(sweep, tmp_path, capsys, monkeypatch):
    fired = []

    def script(spec, attempt):
        if not fired:
            fired.append(1)
            return lambda: os.kill(os.getpid(), signal.SIGINT)
        return "ok"

    def cancel(self, handles):
        os.kill(os.getpid(), signal.SIGINT)          # the second stop, while the first one cancels

    monkeypatch.setattr(FakeExecutor, "cancel", cancel)
    code, fake = sweep(script, grid={"workload.seed": list(range(3))})
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, len(err)) == (exitcodes.INTERRUPTED, 1) and err[0].startswith("interrupted while trials ran")
    assert fake.closed


def test_ctrl_c_while_a_finished_trial_is_written_keeps_that_trial_whole(sweep, tmp_path, monkeypatch):
    real, written = sweep_module.write_trial, []

    def write_trial(run, record, config, files):
        written.append(record.trial_id)
        if len(written) == 2:
            os.kill(os.getpid(), signal.SIGINT)        # Ctrl-C lands as the second trial's folder is written
        return real(run, record, config, files)

    monkeypatch.setattr(sweep_module, "write_trial", write_trial)
    code, _ = sweep(grid={"workload.seed": list(range(4))})
    found = records(tmp_path)
    assert code == exitcodes.INTERRUPTED
    assert [found[t]["status"] for t in written[:2]] == ["ok", "ok"]


def test_resume_runs_only_what_did_not_finish_in_the_same_folder(sweep, tmp_path, capsys):
    grid = {"workload.seed": list(range(4))}
    sweep(lambda spec, attempt: "failed" if spec["swept"]["workload.seed"] == 2 else "ok", grid=grid)
    first = records(tmp_path)
    failed = [t for t, r in first.items() if r["status"] != "ok"]
    (tmp_path / "results" / "single" / "r1" / "summary.parquet").unlink()     # the end never came
    code, fake = sweep(grid=grid, resume="latest", run_id="r2")
    assert code == exitcodes.OK
    assert [s["trial_id"] for s in fake.submitted] == failed
    assert os.listdir(tmp_path / "results" / "single") == ["r1"]
    summary = pd.read_parquet(tmp_path / "results" / "single" / "r1" / "summary.parquet")
    assert len(summary) == 4 and (summary["status"] == "ok").all()
    assert "resuming" in capsys.readouterr().out


def test_resume_latest_takes_the_last_run_id_taken_numbers_as_numbers(sweep, tmp_path):
    for _ in range(11):                       # r1, r1-2 ... r1-11
        sweep(grid={"workload.seed": [0]})
    (tmp_path / "results" / "single" / "r1-11" / "summary.parquet").unlink()
    code, fake = sweep(grid={"workload.seed": [0]}, resume="latest")
    assert (code, fake.submitted) == (0, [])
    assert (tmp_path / "results" / "single" / "r1-11" / "summary.parquet").exists()


def test_resume_removes_only_its_own_half_written_folders(sweep, tmp_path):
    sweep(grid={"workload.seed": [0]})
    trials = tmp_path / "results" / "single" / "r1" / "trials"
    (trials / ".staging-abc-0-1234").mkdir()
    (trials / ".keep").mkdir()
    (trials / ".keep" / "f").write_text("x")
    (trials / ".old-notadir").write_text("x")
    code, _ = sweep(grid={"workload.seed": [0]}, resume="r1")
    assert code == 0
    assert sorted(p.name for p in trials.iterdir() if p.name.startswith(".")) == [".keep", ".old-notadir"]


def test_a_resume_may_widen_the_grid_but_not_measure_other_cells(sweep, tmp_path, capsys):
    """A resume with another workload.steps would have run every cell again beside the old ones,
    and one analysis would have compared two configurations: one line, nothing started. A wider
    grid runs only its new point; a narrower one would leave a cell this command does not plan."""
    sweep(grid={"workload.seed": [0, 1]}, **{"workload.steps": 3})
    capsys.readouterr()
    for seeds, steps, named in (([0, 1], 5, "2 of the 2 trials in"), ([0], 3, "1 of the 2 trials in")):
        code, fake = sweep(grid={"workload.seed": seeds}, resume="latest", **{"workload.steps": steps})
        err = capsys.readouterr().err.strip().splitlines()
        assert code == exitcodes.USAGE and fake.submitted == [] and not fake.closed, err
        assert len(err) == 1 and named in err[0] and "does not plan" in err[0], err
        assert steps == 3 or "(workload.steps 3 there, 5 here)" in err[0], err
    code, fake = sweep(grid={"workload.seed": [0, 1, 2]}, resume="latest", **{"workload.steps": 3})
    assert code == exitcodes.OK and [s["swept"]["workload.seed"] for s in fake.submitted] == [2]
    assert len(records(tmp_path)) == 3


def test_resume_with_a_damaged_trial_json_is_one_line_naming_the_file(sweep, tmp_path, capsys):
    sweep(grid={"workload.seed": [0]})
    (path,) = (tmp_path / "results" / "single" / "r1" / "trials").glob("*/trial.json")
    path.write_text(path.read_text()[:40])
    capsys.readouterr()
    code, fake = sweep(grid={"workload.seed": [0]}, resume="latest")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exitcodes.USAGE and fake.submitted == [] and not fake.closed     # found before it started
    assert len(err) == 1 and err[0].startswith(f"error: {path}: not a complete trial record")



def test_a_resume_of_a_run_another_process_is_writing_is_one_line_and_runs_nothing(sweep, tmp_path, capsys):
    sweep(grid={"workload.seed": [0]})
    run = tmp_path / "results" / "single" / "r1"
    (run / "summary.parquet").unlink()                   # its end never came: a resume would write it
    capsys.readouterr()
    with writing(run):                                   # as a sweep still running holds it
        code, fake = sweep(grid={"workload.seed": [0]}, resume="latest")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exitcodes.LOCKED and fake.submitted == [] and not fake.closed
    assert len(err) == 1 and err[0] == (f"error: resume: {run} is being written by another sweep (pid {os.getpid()}); "
                                        f"wait for it to end or stop it, then resume")
    assert not (run / "summary.parquet").exists()
    assert sweep(grid={"workload.seed": [0]}, resume="latest")[0] == exitcodes.OK      # once it is let go


def test_a_sweep_holds_its_run_folder_while_its_trials_run_and_lets_go_at_its_end(sweep, tmp_path):
    run = tmp_path / "results" / "single" / "r1"
    held = []

    def script(spec, attempt):
        held.append(_busy(run))
        return "ok"

    code, _ = sweep(script, grid={"workload.seed": [0, 1]})
    assert code == exitcodes.OK and held and all(held)
    assert sweep.ends == [run] and not _busy(run)


def _busy(run) -> bool:
    try:
        check_free(run)
    except RunBusy:
        return True
    return False

# -- the run folder ------------------------------------------------------------------------
@pytest.mark.parametrize("key, value", [("sweep.name", "../../escaped"), ("sweep.name", "/tmp/abs-sweep"),
                                        ("run_id", "../../escaped"), ("run_id", "/tmp/abs-run")])
def test_a_name_that_leaves_results_dir_is_refused_before_anything_is_written(sweep, tmp_path, capsys, monkeypatch,
                                                                               key, value):
    """The driver's own wall, behind the schema's plain-name check: a name given past it."""
    built = jobs_for

    def unchecked(*args, **kwargs):
        jobs = built(*args, **kwargs)
        section, _, name = key.rpartition(".")
        for job in jobs:
            setattr(getattr(job.config, section) if section else job.config, name, value)
        return jobs

    monkeypatch.setitem(globals(), "jobs_for", unchecked)
    code, fake = sweep()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exitcodes.USAGE and fake.submitted == []
    assert len(err) == 1 and err[0].startswith(f"error: {key}: ") and "not inside results_dir" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_folder_linked_out_of_results_dir_is_refused(sweep, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "single").symlink_to(tmp_path / "elsewhere")
    code, fake = sweep()
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, fake.submitted, len(err)) == (exitcodes.USAGE, [], 1)
    assert err[0].startswith("error: sweep.name: ") and list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.parametrize("resume", ["{victim}", "../victim", "{results}", "~"])
def test_resume_outside_results_dir_is_refused_and_touches_nothing(sweep, tmp_path, capsys, resume):
    victim = tmp_path / "victim"
    (victim / "trials" / ".keep").mkdir(parents=True)
    (victim / "trials" / ".keep" / "f").write_text("x")
    (tmp_path / "results").mkdir()
    resume = resume.format(victim=victim, results=tmp_path / "results")
    code, fake = sweep(resume=resume)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exitcodes.USAGE and fake.submitted == []
    assert len(err) == 1 and err[0].startswith("error: resume")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == \
        ["results", "victim", "victim/trials", "victim/trials/.keep", "victim/trials/.keep/f"]


def test_a_folder_above_the_run_that_was_there_before_stays(sweep, tmp_path, monkeypatch, sigterm_would_kill):
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(FakeExecutor, "start", lambda self: os.kill(os.getpid(), signal.SIGTERM))
    code, _ = sweep()
    assert code == exitcodes.INTERRUPTED and os.listdir(tmp_path) == ["results"]
    assert os.listdir(tmp_path / "results") == []


def test_a_taken_run_id_gets_a_suffix_and_each_run_keeps_its_own_trials(sweep, tmp_path):
    sweep(grid={"workload.seed": [0]})
    sweep(grid={"workload.seed": [1]})
    runs = tmp_path / "results" / "single"
    assert sorted(os.listdir(runs)) == ["r1", "r1-2"]
    assert [r["swept"]["workload.seed"] for r in read_records(runs / "r1")] == [0]
    second = read_records(runs / "r1-2")
    assert [(r["swept"]["workload.seed"], r["run_id"]) for r in second] == [(1, "r1-2")]
    assert (runs / "r1-2" / "multirun.yaml").read_text() == "multirun: true\n"


def test_a_dry_run_and_bad_input_leave_no_folder(sweep, tmp_path, capsys):
    code, _ = sweep(dry_run=True)
    assert code == 0 and "dry run: 2 trial(s)" in capsys.readouterr().out
    code, _ = sweep(executor="local", **{"resources.every_device": True})    # refused at plan time
    assert code == exitcodes.USAGE and "error: resources.every_device" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_results_dir_that_is_a_file_is_one_line_even_for_a_dry_run(sweep, tmp_path, capsys):
    (tmp_path / "results").write_text("not a folder")
    code, _ = sweep(dry_run=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exitcodes.USAGE and len(err) == 1 and err[0].startswith("error: results_dir: ")


# -- signals at every phase ---------------------------------------------------------------
@pytest.fixture
def sigterm_would_kill():
    """SIGTERM's default ends the process: stand in a handler that only notes it came, so a
    driver that forgot to catch SIGTERM shows as "no interrupt" instead of ending pytest."""
    came = []
    previous = signal.signal(signal.SIGTERM, lambda *_: came.append(1))
    yield came
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_while_planning_is_one_line_130_and_nothing_written(sweep, tmp_path, capsys, monkeypatch,
                                                                     sigterm_would_kill):
    planned = driver.plan

    def plan(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        return planned(*args)

    monkeypatch.setattr(driver, "plan", plan)
    code, fake = sweep()
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, sigterm_would_kill) == (exitcodes.INTERRUPTED, [])
    assert err == ["interrupted while planning: nothing was written"]
    assert not (tmp_path / "results").exists()


def test_sigterm_before_any_trial_removes_the_new_run_folder_and_what_it_made_above(sweep, tmp_path, capsys, monkeypatch, sigterm_would_kill):
    monkeypatch.setattr(FakeExecutor, "start", lambda self: os.kill(os.getpid(), signal.SIGTERM))
    code, fake = sweep()
    assert (code, capsys.readouterr().err.strip()) == (exitcodes.INTERRUPTED,
                                                       "interrupted before any trial started: nothing was kept")
    assert not (tmp_path / "results").exists() and fake.closed       # nor the folders above the run's


def test_a_refusal_before_the_first_trial_still_ends_the_executor(sweep, tmp_path, capsys, monkeypatch):
    """The executor was already taken from the launcher's head start: nothing else would end it."""
    def no_room(prefix):
        raise ConfigError("the temp folder is full")

    monkeypatch.setattr(driver, "held_folder", no_room)
    code, fake = sweep()
    assert (code, capsys.readouterr().err.strip()) == (ConfigError.code, "error: the temp folder is full")
    assert fake.closed


def test_a_stop_after_the_trial_loop_is_one_line_saying_where_the_trials_are_kept(sweep, tmp_path, capsys, monkeypatch,
                                                                                  sigterm_would_kill):
    """The loop says its own line only for a stop inside it; this one came once it had returned."""
    loop = driver.Sweep.run_trials

    def run_trials(self, *args):
        code = loop(self, *args)
        os.kill(os.getpid(), signal.SIGTERM)
        return code

    monkeypatch.setattr(driver.Sweep, "run_trials", run_trials)
    code, fake = sweep(grid={"workload.seed": [0, 1]})
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, sigterm_would_kill, len(err)) == (exitcodes.INTERRUPTED, [], 1)
    assert err[0].startswith("interrupted before the sweep ended: finished trials are kept in") and "resume=latest" in err[0]
    assert len(records(tmp_path)) == 2 and fake.closed


def test_a_stop_before_the_trial_loop_began_says_nothing_was_kept_and_removes_the_run_folder(
        sweep, tmp_path, capsys, monkeypatch, sigterm_would_kill):
    def run_trials(self, *args):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the stop is raised before this line")

    monkeypatch.setattr(driver.Sweep, "run_trials", run_trials)
    code, fake = sweep()
    assert (code, capsys.readouterr().err.strip()) == (exitcodes.INTERRUPTED,
                                                       "interrupted before any trial started: nothing was kept")
    assert not (tmp_path / "results").exists() and fake.closed


def test_a_stop_as_the_executors_end_begins_beside_the_table_waits_for_it_and_warns_of_its_failure(
        sweep, tmp_path, capsys, monkeypatch, sigterm_would_kill):
    roots, begin_aside = [], driver.closing_aside

    def closing_aside(executor, scratch):
        roots.append(scratch)
        os.kill(os.getpid(), signal.SIGTERM)          # held until the end is begun (interrupts.deferred)
        return begin_aside(executor, scratch)

    def close(self):
        raise RuntimeError("the executor's end broke")

    monkeypatch.setattr(FakeExecutor, "close", close)
    monkeypatch.setattr(FakeExecutor, "closes_beside_the_end", True)
    monkeypatch.setattr(driver, "closing_aside", closing_aside)
    code, _ = sweep()
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, sigterm_would_kill, len(err)) == (exitcodes.INTERRUPTED, [], 2)
    assert err[0].startswith("interrupted before the sweep ended: finished trials are kept in")
    assert err[1] == "warning: ending the executor failed: RuntimeError: the executor's end broke"
    assert roots and not roots[0].exists()            # the trials' scratch folder went all the same


def test_sigterm_while_publishing_is_one_line_and_resume_publishes_again(sweep, tmp_path, capsys, monkeypatch,
                                                                          sigterm_would_kill):
    def publish_end(sweep, root, run):
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    monkeypatch.setattr(driver, "publish_end", publish_end)
    code, _ = sweep()
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, sigterm_would_kill, len(err)) == (exitcodes.INTERRUPTED, [], 1)
    assert err[0].startswith("interrupted while publishing") and "resume=latest" in err[0]


def test_resume_of_a_finished_run_runs_no_trial_and_publishes_the_end(sweep, tmp_path):
    sweep()
    (tmp_path / "results" / "single" / "r1" / "summary.parquet").unlink()
    code, fake = sweep(resume="latest")
    assert (code, fake.submitted) == (0, [])
    assert (tmp_path / "results" / "single" / "r1" / "summary.parquet").exists()
    assert len(sweep.ends) == 2 and sweep.ends[1] == (tmp_path / "results" / "single" / "r1").resolve()


def test_scratch_folder_of_the_run_is_removed_whatever_the_end(sweep, tmp_path, monkeypatch):
    roots = []

    def script(spec, attempt):
        roots.append(spec["scratch_root"])
        return lambda: os.kill(os.getpid(), signal.SIGINT)

    code, _ = sweep(script, grid={"workload.seed": [0]})
    assert code == exitcodes.INTERRUPTED and roots and not os.path.exists(roots[0])


def test_resume_of_repeats_auto_keeps_the_later_rounds_finished_repeats(sweep, tmp_path):
    """repeats=auto plans only the first round up front; a resumed run must still count the later
    rounds' finished repeats, or the rounds would run them again over the finished ones."""
    from types import SimpleNamespace

    from sweeper.runfolder import earlier_results

    sweep(grid={"workload.seed": [0, 1]}, repeats=4)
    run = tmp_path / "results" / "single" / "r1"
    done = records(tmp_path)
    cells = {r["cell_id"] for r in done.values()}
    first_round = [SimpleNamespace(trial_id=f"{c}-{i}", cell_id=c) for c in cells for i in (0, 1)]
    assert set(earlier_results(run, first_round, any_repeat=True)) == set(done)          # all 8
    assert set(earlier_results(run, first_round)) == {t.trial_id for t in first_round}   # fixed repeats: 4


def test_the_executor_ends_beside_the_end_of_the_sweep_and_the_sweep_returns_after_both(sweep, monkeypatch):
    """A local Ray's end (mostly a wait inside Ray) overlaps the analysis and the table, which need
    nothing of it; the sweep returns only once the executor is closed."""
    published = threading.Event()
    seen = {}

    def close(self):
        seen["published_meanwhile"] = published.wait(10)
        self.closed = True

    def publish_end(sweep, root, run):
        published.set()
        return exitcodes.OK

    monkeypatch.setattr(FakeExecutor, "close", close)
    monkeypatch.setattr(FakeExecutor, "closes_beside_the_end", True)     # as Ray's does
    monkeypatch.setattr(driver, "publish_end", publish_end)
    code, fake = sweep()
    assert (code, seen, fake.closed) == (exitcodes.OK, {"published_meanwhile": True}, True)


def test_an_executor_that_reaps_any_child_is_closed_before_the_end_is_published(sweep, monkeypatch):
    """The local executor's close reaps every child the driver adopted during the sweep; beside the
    end of the sweep, it could take the exit status of a subprocess that the end waits on."""
    order = []
    monkeypatch.setattr(FakeExecutor, "close", lambda self: order.append("closed"))
    monkeypatch.setattr(driver, "publish_end", lambda sweep, root, run: order.append("published") or 0)
    assert sweep()[0] == exitcodes.OK and order == ["closed", "published"]
    from sweeper.executors.local import LocalExecutor
    from sweeper.executors.ray_executor import RayExecutor

    assert (LocalExecutor.closes_beside_the_end, RayExecutor.closes_beside_the_end) == (False, True)


def test_an_error_in_the_executors_end_is_raised_once_the_end_is_published(sweep, monkeypatch):
    roots = []

    def close(self):
        raise RuntimeError("the executor's end broke")

    def script(spec, attempt):
        roots.append(spec["scratch_root"])
        return "ok"

    monkeypatch.setattr(FakeExecutor, "close", close)
    monkeypatch.setattr(FakeExecutor, "closes_beside_the_end", True)
    with pytest.raises(RuntimeError, match="the executor's end broke"):
        sweep(script)
    assert len(sweep.ends) == 1                      # the table and files were published all the same
    assert roots and not os.path.exists(roots[0])    # and the trials' scratch folder went all the same
