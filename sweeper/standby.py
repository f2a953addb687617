"""The next trial's process, made ready while the current one runs (`resources.prestart`).

A fresh process per trial pays its fork and, on a GPU, CUDA's start (its driver, context and
cuBLAS handle: 0.2-0.4 s on an H200) before the workload begins. With prestart, the zygote forks
the next trial's keeper and process as soon as a trial starts (sweeper/_zygote.py); that standby
process starts CUDA on the same GPUs and then waits for the next trial's spec, so the next trial
begins warm. It is still a process of its own that no trial ran in.

What keeps the measurement clean: no trial's measured steps overlap another process's CUDA start
or end on its GPUs. A standby holds a shared lock on a file per GPU while it starts CUDA, and a
trial that has written its record holds one while its process (and CUDA context) goes; a trial
takes the same file's exclusive lock for a moment before its first measured step (`wait_quiet`,
called by the probe), so it waits for both. Locks die with their process, so a standby or a trial
killed mid-start holds nothing up. The files live in the driver's scratch folder, removed with it.
"""
from __future__ import annotations

import fcntl
import os
import re
import time
from typing import List

LOCKS = "SWEEPER_GPU_LOCKS"      # the folder of the per-GPU lock files; set for prestarted trials only
QUIET_WAIT_S = 10.0              # a standby stuck in CUDA's start holds a trial up this long at most


def lock_paths(env=None) -> List[str]:
    """One lock file per GPU the process sees (CUDA_VISIBLE_DEVICES: indices or UUIDs)."""
    env = os.environ if env is None else env
    folder, visible = env.get(LOCKS), env.get("CUDA_VISIBLE_DEVICES", "")
    if not folder or not visible.strip():
        return []
    names = [re.sub(r"[^A-Za-z0-9_-]", "_", d.strip()) for d in visible.split(",") if d.strip()]
    return [os.path.join(folder, f"gpu-{name}.lock") for name in names]


def hold(paths: List[str]) -> List[int]:
    """Shared locks on `paths`, held until the returned descriptors close (or the process ends)."""
    fds = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:          # the driver's folder is gone: the sweep is ending
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            continue
        fds.append(fd)
    return fds


def release(fds: List[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def wait_quiet(timeout_s: float = QUIET_WAIT_S) -> float:
    """Waits until no standby is starting CUDA and no finished trial's process is ending on this
    process's GPUs; returns the seconds waited (0.0 where prestart is off)."""
    started = time.monotonic()
    deadline = started + timeout_s
    for path in lock_paths():
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            continue
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.005)
        finally:
            os.close(fd)
    return time.monotonic() - started


def warm_device() -> None:
    """CUDA's start on the GPUs this process sees, as a trial's first use would make it: the driver,
    the primary context, cuBLAS's handle and its library's first-call set-up (a small bf16 and fp32
    matmul: a first 8192^2 bf16 matmul took 0.07-0.10 s after the handle alone and 0.005 s after
    these on an H200). No random numbers are drawn. What it allocated is given back and the peaks
    are reset, so the trial's memory figures start where a fresh process's would."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        return
    import torch

    if not torch.cuda.is_available():
        return
    torch.zeros(1, device="cuda")
    torch.cuda.current_blas_handle()
    for dtype in (torch.bfloat16, torch.float32):
        square = torch.ones(256, 256, device="cuda", dtype=dtype)
        square @ square
    del square
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
