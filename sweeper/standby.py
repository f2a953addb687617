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
import sys
import time
from typing import List, Optional, Tuple

LOCKS = "SWEEPER_GPU_LOCKS"      # the folder of the per-GPU lock files; set for prestarted trials only
QUIET_WAIT_S = 10.0              # a standby stuck in CUDA's start holds a trial up this long at most


def visible_devices(env=None) -> List[str]:
    """The GPUs CUDA_VISIBLE_DEVICES names (indices or UUIDs), in its order; [] where it names none."""
    env = os.environ if env is None else env
    return [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]


def lock_paths(env=None) -> List[str]:
    """One lock file per GPU the process sees."""
    env = os.environ if env is None else env
    folder = env.get(LOCKS)
    if not folder:
        return []
    return [os.path.join(folder, f"gpu-{re.sub(r'[^A-Za-z0-9_-]', '_', d)}.lock") for d in visible_devices(env)]


def open_locks(paths: List[str]) -> List[int]:
    """The lock files opened, not locked: a keeper opens them before it forks its trial, so that the
    lock the trial takes on them (`hold_open`) lasts until the keeper, the last holder, has exited."""
    fds = []
    for path in paths:
        try:
            fds.append(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError:          # the driver's folder is gone: the sweep is ending
            pass
    return fds


def hold_open(fds: List[int]) -> List[int]:
    """Shared locks on opened lock files; those that could not be locked are left out."""
    held = []
    for fd in fds:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            held.append(fd)
        except OSError:
            pass
    return held


def hold(paths: List[str]) -> List[int]:
    """Shared locks on `paths`, held until the returned descriptors close (or the process ends)."""
    fds = open_locks(paths)
    held = hold_open(fds)
    release([fd for fd in fds if fd not in held])
    return held


def release(fds: List[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def wait_quiet(timeout_s: Optional[float] = None) -> Tuple[float, bool]:
    """Waits until no standby is starting CUDA and no finished trial's process is ending on this
    process's GPUs, `timeout_s` (QUIET_WAIT_S) at most: (the seconds waited, whether they were quiet)."""
    started = time.monotonic()
    deadline = started + (QUIET_WAIT_S if timeout_s is None else timeout_s)
    quiet = True
    for fd in open_locks(lock_paths()):
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        quiet = False
                        break
                    time.sleep(0.005)
        finally:
            os.close(fd)
    return time.monotonic() - started, quiet


def wait_before_measuring(figures: dict, warn) -> None:
    """The probe, before a prestarted trial's first measured step: no measured step overlaps another
    process's CUDA start or end on this trial's GPUs; how long that held it is a figure of its own."""
    waited, quiet = wait_quiet()
    figures["prestart_wait_s"] = round(waited, 4)
    if not quiet:
        warn(f"resources.prestart: another process was still starting or ending CUDA on this trial's GPU after "
             f"{waited:.0f} s; its measured steps began beside it (resources.prestart=false keeps trials apart)")


def give_back_gpu_memory() -> None:
    """A finished trial's cached CUDA memory back to the driver, where it used CUDA. Never raises:
    after a CUDA error (already in the record) the call fails, and the process ends all the same.
    No garbage collection: it would run finalizers (loader iterators, process groups) that the
    process's end skips; memory that only a collection would free goes with the process."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except BaseException:
        pass


def warm_device() -> None:
    """CUDA's start on the GPUs this process sees, as a trial's first use would make it: the driver,
    the primary context, cuBLAS's handle and its library's first-call set-up (a small bf16 and fp32
    matmul: a first 8192^2 bf16 matmul took 0.07-0.10 s after the handle alone and 0.005 s after
    these on an H200). No random numbers are drawn. What it allocated is given back and the peaks
    are reset, so the trial's memory figures start where a fresh process's would."""
    if len(visible_devices()) != 1:
        return                   # a trial of several GPUs often starts a process per rank: none is made here
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
