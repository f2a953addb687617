"""executor=local: the configs composed in a child while the command's own process imports torch,
then the trials run in the command's own process (sweeper/composer.py)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from sweeper import timeline
from tests.conftest import ROOT, checkout_first

QUICK = ["workload.target=tests.workloads_for_tests:quick", "executor=local", "wandb.enabled=false",
         "report.enabled=false", "history.enabled=false"]


def _command(tmp_path, *args):
    marks = tmp_path / "timeline"
    env = {**os.environ, "PYTHONPATH": checkout_first(), timeline.VARIABLE: str(marks), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, marks


def _first_marks(marks):
    first = {}
    for at, pid, name in timeline.read(str(marks)):
        first.setdefault(name, (at, pid))
    return first


@pytest.mark.slow
def test_the_trials_run_in_the_commands_own_process_and_the_composing_in_another(tmp_path):
    proc, marks = _command(tmp_path, *QUICK, "workload.seed=0,1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "[2/2] ok" in out, out[-2000:] + err[-2000:]
    first = _first_marks(marks)
    assert first["trial_start"][1] == first["executor_started"][1] == proc.pid     # a debugger's process
    assert first["main"][1] != proc.pid                                              # composed in the child
    assert err.strip() == "", err


@pytest.mark.slow
def test_a_mistake_found_while_composing_is_one_line_and_its_exit_code(tmp_path):
    proc, marks = _command(tmp_path, *QUICK, "workload.steps=-1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2
    assert err.strip().splitlines() == ["error: workload.steps: must be positive, got -1"], err
    assert "trial_start" not in _first_marks(marks) and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_sigterm_to_the_command_while_it_composes_is_one_line_and_exit_130(tmp_path):
    """Passed on to the composing child, which says it; or, if the jobs were handed over already,
    the command's own stop: one line and exit 130 either way, nothing run."""
    proc, marks = _command(tmp_path, *QUICK, "+workload.params.sleep_s=30")
    deadline = time.monotonic() + 60
    while "main" not in _first_marks(marks) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err


@pytest.mark.parametrize("args, splits", [
    (["executor=local"], True),
    (["executor=local", "workload.device=cpu", "data.batch_size=8,16"], True),     # a CPU sweep too
    (["-m", "executor=local"], True),
    (["executor=local", "dry_run=true"], False),           # nothing to import torch for
    (["executor=local", "--help"], False),
    (["executor=local", "--cfg", "job"], False),
    (["executor=local", "+sweep=overnight"], False),       # a suite runs each sweep as a command of its own
    (["executor=ray"], False),
    ([], False),                                           # executor=local in a file: composed in one process
])
def test_only_a_command_line_that_says_executor_local_and_sweeps_composes_in_a_child(args, splits):
    from sweeper.headstart import may_run_in_process

    assert may_run_in_process(args) is splits
