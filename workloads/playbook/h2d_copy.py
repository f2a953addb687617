"""Host-to-device copy: GB/s of pinned and pageable copies, and how much of a
non_blocking copy hides behind a running matmul.

Each step copies `size_mb` MB from host memory (pinned or pageable) into a tensor on
the device, `copies` times back to back, timed by the probe (CUDA events on a GPU). Small
copies come many to a step, as a loop of copies runs them: one copy of 0.5 MB lasts about as
long as launching it, so a copy timed alone measures the launch. Trial figures:

    copy_gbps        MB per step / the median time of its h2d phase (the headline)
    pinned_gbps, pageable_gbps, pinned_speedup   with compare=true (the other kind, 10 copies)
    overlap_share    with overlap=true: the share of the copy's time that hid behind a matmul
                     running at the same time ((copy + matmul - both) / copy, in [0, 1])

On a CPU there is no device: each step copies into another host tensor (a memcpy), pinned
memory does not exist (both kinds are the same memory), and the overlap runs the copy in a
thread beside the matmul. A warning says so; the figures are finite all the same.
Reference (one H200, a plain script): 54.3 GB/s pinned, 6.1 GB/s pageable at 512 MB.
"""
from __future__ import annotations

import math
import statistics
import threading
import time
from typing import Any, Callable, Dict

import torch

from sweeper.spec import typed_params
from workloads.playbook.specs import AUTO, H2D_COPY as SPEC, CopyParams, by_device

SIDE_COPIES = 10        # timings of the other memory kind when compare=true
STEP_MB = {"cuda": 64, "cpu": 8}   # copies: auto moves this much a step
OVERLAP_REPEATS = 3     # the overlap is the median of this many tries


def host_buffer(nbytes: int, pinned: bool) -> torch.Tensor:
    buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    buf.fill_(1)          # touch every page, so no copy pays for first-touch faults
    return buf


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copies_per_step(params: CopyParams, size_mb: float, device: torch.device) -> int:
    if params.copies != AUTO:
        return int(params.copies)
    return max(1, math.ceil(STEP_MB.get(device.type, STEP_MB["cpu"]) / size_mb))


def copy_p50_s(probe) -> float:
    """The median of the measured steps' own h2d phase: event, copies, event, as a plain loop
    times it (the step adds the probe's own marks around it, microseconds)."""
    phases = [r["phase_h2d_s"] for r in probe.measured()]
    return statistics.median(phases) if phases else math.nan


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(CopyParams, cfg.workload.params)
    device = torch.device(cfg.workload.device)
    on_gpu = device.type == "cuda"
    size_mb = float(by_device(params.size_mb, device.type, 512, 8))
    nbytes = int(size_mb * 1e6)
    if not on_gpu:
        probe.warn("h2d_copy: no CUDA device, so this measured a host memcpy (torch copy_ into another host "
                   "tensor), not a host-to-device copy; pinned memory does not exist without CUDA")
    pinned = params.pinned and on_gpu
    copies = copies_per_step(params, size_mb, device)
    src, dst = host_buffer(nbytes, pinned), torch.empty(nbytes, dtype=torch.uint8, device=device)
    while probe.more(cfg.workload.steps):
        with probe.step(items=size_mb * copies):
            with probe.phase("h2d"):
                for _ in range(copies):
                    dst.copy_(src, non_blocking=pinned)
    copy_gbps = copies * nbytes / copy_p50_s(probe) / 1e9
    out = {"copy_gbps": copy_gbps, "size_mb": size_mb, "copies_per_step": copies, "pinned_effective": pinned,
           "copy_kind": "host_to_device" if on_gpu else "host_to_host", "device": str(device)}
    if params.compare:
        out.update(compare_kinds(copy_gbps, pinned, params.pinned, nbytes, copies, dst, device))
    if params.overlap:
        out.update(overlap(src, dst, device, pinned))
    return out


def compare_kinds(copy_gbps: float, pinned: bool, wanted_pinned: bool, nbytes: int, copies: int,
                  dst: torch.Tensor, device: torch.device) -> Dict[str, float]:
    """The other memory kind at the same size and copies: pinned_gbps, pageable_gbps and their ratio."""
    other_pinned = (not wanted_pinned) and device.type == "cuda"
    other = host_buffer(nbytes, other_pinned)

    def copy_all():
        for _ in range(copies):
            dst.copy_(other, non_blocking=other_pinned)
    copy_all()     # warm
    other_gbps = copies * nbytes / median_seconds(copy_all, device, SIDE_COPIES) / 1e9
    pinned_gbps, pageable_gbps = (copy_gbps, other_gbps) if wanted_pinned else (other_gbps, copy_gbps)
    return {"pinned_gbps": pinned_gbps, "pageable_gbps": pageable_gbps, "pinned_speedup": pinned_gbps / pageable_gbps}


def matmul_work(device: torch.device, copy_s: float) -> Callable[[], Any]:
    """Enough matmuls on the device to last about as long as one copy."""
    n = 4096 if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device)
    one = median_seconds(lambda: a @ a, device, 3)
    count = max(1, math.ceil(copy_s / max(one, 1e-6)))

    def work():
        for _ in range(count):
            a @ a
    return work


def overlap(src: torch.Tensor, dst: torch.Tensor, device: torch.device, pinned: bool) -> Dict[str, float]:
    """(copy + matmul - both at once) / copy: the share of the copy that hid behind the matmul.
    On a GPU the copy runs on a side stream (non_blocking from pinned memory); on a CPU in a thread."""
    copy = lambda: dst.copy_(src, non_blocking=pinned)   # noqa: E731
    copy_s = median_seconds(copy, device, OVERLAP_REPEATS)
    work = matmul_work(device, copy_s)
    work_s = median_seconds(work, device, OVERLAP_REPEATS)
    both = both_on_gpu(copy, work, device) if device.type == "cuda" else both_in_threads(copy, work)
    both_s = median_seconds(both, device, OVERLAP_REPEATS)
    hidden = (copy_s + work_s - both_s) / copy_s
    return {"overlap_share": min(1.0, max(0.0, hidden)), "overlap_copy_ms": copy_s * 1e3,
            "overlap_matmul_ms": work_s * 1e3, "overlap_both_ms": both_s * 1e3}


def both_on_gpu(copy: Callable[[], Any], work: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    side = torch.cuda.Stream(device)

    def both():
        start = torch.cuda.Event()
        start.record()                          # before the matmul: the copy may start with it
        work()                                  # queued on the default stream first (a pageable copy blocks the host)
        side.wait_event(start)
        with torch.cuda.stream(side):
            copy()
        torch.cuda.current_stream(device).wait_stream(side)
    return both


def both_in_threads(copy: Callable[[], Any], work: Callable[[], Any]) -> Callable[[], Any]:
    def both():
        thread = threading.Thread(target=copy)
        thread.start()
        work()
        thread.join()
    return both
