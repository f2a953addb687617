"""A user workload of known length: bf16 matmuls on the trial's GPU for a fixed time.

    python -m sweeper workload.target=benchmarks.gpu_busy:run +workload.params.seconds=3 \
        resources.isolation=gpu resources.gpus=1 workload.seed=0,1,2,3

The measured steps run until `seconds` of compute have passed, after the device is set
up (CUDA start, the operands, a first matmul that loads cuBLAS); that set-up is timed into
figures of its own, so a scheduler's packing can be held against N x seconds / GPUs.
`workload.steps` is ignored; `workload.warmup_steps` steps run first, flagged.
On a CPU (workload.device=cpu) it runs small float32 matmuls instead: a smoke test.
"""
from __future__ import annotations

import time

# -- defaults (override with +workload.params.NAME=...) --------------------------------
SECONDS = 3.0            # compute time of the trial, after set-up
SIZE_GPU = 8192          # square bf16 operands: about 1.1 TFLOP per matmul, ~2 ms on an H200
SIZE_CPU = 256           # float32 on a CPU, for a smoke test
MATMULS_PER_STEP = 32    # one probe step; on an H200 about 60 ms (CPU: ~10 ms)


def _sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def set_up(device: str, size: int, probe):
    """CUDA start, operands and a first matmul, each timed into a figure."""
    import torch

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with probe.timed_figure("cuda_init_s"):
        torch.zeros(1, device=device)
        _sync(torch, device)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    with probe.timed_figure("first_matmul_s"):
        a @ b
        _sync(torch, device)
    return torch, a, b


def busy(seconds: float, device: str, size: int, per_step: int, warmup_steps: int, probe) -> dict:
    torch, a, b = set_up(device, size, probe)
    started, steps = time.time(), 0
    deadline = time.perf_counter() + seconds
    while steps < warmup_steps or time.perf_counter() < deadline:
        with probe.step(items=per_step):
            for _ in range(per_step):
                a @ b
            _sync(torch, device)
        steps += 1
    ended = time.time()
    flops = 2.0 * size**3 * per_step * steps
    return {"compute_started_at": started, "compute_ended_at": ended, "busy_s": ended - started,
            "tflops": flops / max(ended - started, 1e-9) / 1e12, "matmul_size": size}


def run(cfg, probe):
    params, device = cfg.workload.params, cfg.workload.device
    size = int(params.get("size", SIZE_GPU if device.startswith("cuda") else SIZE_CPU))
    return busy(float(params.get("seconds", SECONDS)), device, size,
                int(params.get("matmuls_per_step", MATMULS_PER_STEP)), cfg.workload.warmup_steps, probe)
