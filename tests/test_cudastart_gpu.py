"""CUDA's start with the command (sweeper/cudastart.py), for real on a CUDA machine (skipped without one).

    python -m pytest -m gpu tests/test_cudastart_gpu.py      # about 15 s on one H200
"""
import os
import subprocess
import sys

import pytest

from sweeper import timeline
from tests.conftest import ROOT, checkout_first, has_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.skipif(not has_cuda(), reason="needs a CUDA GPU")]

BUSY = ["workload.target=benchmarks.gpu_busy:run", "workload.steps=1", "workload.warmup_steps=0",
        "+workload.params.seconds=0.2", "resources.isolation=gpu", "resources.gpus=1",
        "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]


def test_an_in_process_gpu_sweep_has_cudas_start_made_beside_composing_and_its_trial_runs_on_it(tmp_path):
    marks = tmp_path / "timeline"
    env = {**os.environ, "PYTHONPATH": checkout_first(), timeline.VARIABLE: str(marks)}
    result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}", "executor=local",
                             *BUSY], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "[1/1] ok" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    first = {}
    for at, pid, name in timeline.read(str(marks)):
        first.setdefault(name, (at, pid))
    assert "cuda_ready" in first, "CUDA's start did not begin with the command"
    assert first["cuda_ready"][1] == first["main"][1] == first["workload_start"][1]      # the driver's own process
    assert first["cuda_ready"][0] < first["executor_started"][0] < first["workload_start"][0]
