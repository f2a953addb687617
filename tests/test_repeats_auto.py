"""repeats=auto on a real sweep: sleep-based cells whose differences are known (the issue 21 workload,
tests/workloads_for_tests.py:shifted), run by `python -m sweeper` in a process of its own."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent

SHIFTS = """# @package _global_
sweep:
  name: shifts
workload:
  target: tests.workloads_for_tests:shifted
  steps: 15
  warmup_steps: 2
  params:
    sleep_s: 0.01
    jitter: 0.03
    variant: base
analysis:
  baseline: workload.params.variant=base
hydra:
  sweeper:
    params:
      workload.params.variant: base,same,plus30
"""


@pytest.mark.slow
def test_repeats_auto_decides_a_known_slowdown_and_a_twin_in_fewer_trials_than_five_repeats(tmp_path):
    (tmp_path / "conf" / "sweep").mkdir(parents=True)
    (tmp_path / "conf" / "sweep" / "shifts.yaml").write_text(SHIFTS)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWEEPER_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "sweeper", "+sweep=shifts", "repeats=auto", "executor=local",
           f"results_dir={tmp_path / 'results'}", "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    run = next((tmp_path / "results" / "shifts").iterdir())
    cells = pd.read_parquet(run / "cells.parquet").set_index("workload.params.variant")
    assert (cells.loc["plus30", "verdict"], cells.loc["plus30", "stopped"]) == ("slower", "decided")
    assert cells.loc["same", "verdict"] not in ("faster", "slower")
    trials = len(list((run / "trials").iterdir()))
    assert trials <= 0.6 * (3 * 5 + 5)                   # repeats=5: each cell 5 times, the baseline 10
    assert "repeats=auto: " in done.stdout and "stopped" in done.stdout
