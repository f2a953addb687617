"""resources.prestart on a real GPU (skipped without one): a standby starts CUDA while a trial
runs, the next trial runs in it, and its first measured step waits for no one.

    python -m pytest -m gpu tests/test_standby_gpu.py      # about 30 s on one H200
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import timeline
from tests.conftest import ROOT, checkout_first, has_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")]


def test_gpu_trials_run_in_standbys_with_cuda_and_cublas_started(tmp_path):
    marks = tmp_path / "timeline"
    env = {**os.environ, "PYTHONPATH": checkout_first(), timeline.VARIABLE: str(marks)}
    result = subprocess.run(
        [sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
         "workload.target=benchmarks.gpu_busy:run", "workload.steps=1", "workload.warmup_steps=5",
         "+workload.params.seconds=1", "+workload.params.size=2048", "resources.isolation=gpu", "resources.gpus=1",
         "workload.seed=0,1,2", "wandb.enabled=false", "report.enabled=false", "history.enabled=false"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    found = {}
    for _, pid, name in timeline.read(str(marks)):
        found.setdefault(name, []).append(pid)
    assert set(found["trial_start"]) <= set(found["standby_ready"])       # the first's too, asked at its submission
    records = [json.loads(p.read_text()) for p in Path(tmp_path / "results").glob("*/*/trials/*/trial.json")]
    assert [r["status"] for r in records] == ["ok"] * 3
    for record in records:
        figures = record["figures"]
        assert figures["cuda_init_s"] < 0.05 and figures["first_matmul_s"] < 0.05, figures   # started in the standby
        assert figures["prestart_wait_s"] < 1.0
