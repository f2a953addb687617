"""CUDA's start with the command, for trials that run in its own process (executor=local) on a GPU.

The driver API's start (cuInit) and the first device's primary context take 0.19 s on an H200
(0.09 + 0.10). Made in a thread as the command starts, through ctypes, which lets go of Python's
lock while it calls libcuda, they run beside Hydra's import and composing, which hold it; torch,
imported by the first trial, then retains the same primary context instead of making one. The
floor a sweep is held against (`import torch; torch.zeros(1, device='cuda')`) pays the whole start.

Started only where the command line asks for executor=local and the machine has a GPU device node
(sweeper/headstart.py); the first trial waits for it (`settle`) and lets the context go when it
needs no GPU, so no idle context holds memory on a GPU that nothing of the sweep uses.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional

from sweeper.timeline import mark

_START: Optional[threading.Thread] = None
_HELD: dict = {}                  # "lib", "device": the primary context this module retained


def visible_gpus(dev: str = "/dev") -> int:
    """The GPUs this process may use, without importing torch or starting CUDA: NVIDIA's device
    nodes, as many as CUDA_VISIBLE_DEVICES names where it is set (as CUDA and Ray read it)."""
    nodes = len([d for d in os.listdir(dev) if d.startswith("nvidia") and d[6:].isdigit()]) \
        if os.path.isdir(dev) else 0
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is None:
        return nodes
    return min(nodes, len([d for d in named.split(",") if d.strip()]))


def start() -> None:
    """Starts CUDA and retains device 0's primary context in a thread; a second call starts nothing."""
    global _START
    if _START is not None:
        return
    _START = threading.Thread(target=_retain, name="sweeper-cuda-start", daemon=True)
    _START.start()


def _retain() -> None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:             # no driver library: the trial's torch says so, as it would have
        return
    device, context = ctypes.c_int(), ctypes.c_void_p()
    if lib.cuInit(0) or lib.cuDeviceGet(ctypes.byref(device), 0):
        return                  # no usable device (CUDA_VISIBLE_DEVICES="", say): nothing is held
    if lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0:
        _HELD.update(lib=lib, device=device)
        mark("cuda_ready")


def settle(uses_gpu: bool) -> None:
    """Before a trial runs in this process: waits for the start (torch's own must not race it),
    and lets the context go when the trial needs no GPU."""
    if _START is None:
        return
    _START.join()
    if not uses_gpu:
        release()


def release() -> None:
    """Lets this module's hold on the context go (torch keeps its own, where a trial retained it)."""
    lib, device = _HELD.pop("lib", None), _HELD.pop("device", None)
    if lib is not None:
        release_v2 = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or lib.cuDevicePrimaryCtxRelease
        release_v2(device)
