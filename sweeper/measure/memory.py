"""Memory readings: the trial process and its DataLoader workers apart, pinned and CUDA memory.

Host memory is USS (pages only this process holds) and PSS (shared pages split
among their users) from /proc/<pid>/smaps_rollup via psutil. Reading it walks the
process's page tables: 3-15 ms per process that has imported torch (2-core VM),
so the probe asks for it every `probe.memory_every` steps and the sampler's
memory thread reads it, using at most 2% of one core. Children of the trial
process are its DataLoader workers; helpers the probe starts itself (py-spy)
and processes named with `Probe.exclude_process` (other ranks) are left out.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Set

MB = 1e6


def descendants(proc):
    from sweeper.measure.sampler import descendants as listed

    return listed(proc)


def _process_memory(proc) -> Optional[Dict[str, float]]:
    import psutil

    try:
        info = proc.memory_full_info()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None    # a worker that exited between listing and reading
    return {"rss": info.rss / MB, "uss": info.uss / MB, "pss": getattr(info, "pss", float("nan")) / MB}


class TreeMemory:
    """Callable: one reading of the trial process and of its children, in MB."""

    def __init__(self, pid: Optional[int] = None):
        import psutil

        self.process = psutil.Process(pid or os.getpid())
        self.exclude_pids: Set[int] = set()

    def __call__(self) -> Dict[str, float]:
        import psutil

        out: Dict[str, float] = {}
        main = _process_memory(self.process) or {}
        out.update({f"mem_main_{k}_mb": v for k, v in main.items()})
        try:
            children = descendants(self.process)   # the trial's subtree only, not all of /proc
        except psutil.NoSuchProcess:
            children = []
        workers = [_process_memory(c) for c in children if c.pid not in self.exclude_pids]
        if all(w is not None and w["rss"] > 0 for w in workers):
            out["mem_workers_n"] = len(workers)
            for key in ("rss", "uss", "pss"):
                out[f"mem_workers_{key}_mb"] = sum(w[key] for w in workers)
        # else a worker exited while being read (the loader shutting down or restarting its
        # workers): a partial sum would look like a drop, so the workers' part is left out
        out.update(pinned_memory())
        return out


def pinned_memory() -> Dict[str, float]:
    """Pinned host memory of torch's caching host allocator, once CUDA is in use.

    active: pinned blocks handed out and not yet reusable (batches in flight to
    the GPU); pool: all pinned blocks the allocator holds, cached ones included.
    """
    torch = sys.modules.get("torch")    # never import torch, nor start CUDA, just to read this
    if torch is None or not torch.cuda.is_initialized() or not hasattr(torch.cuda, "host_memory_stats"):
        return {}
    stats = torch.cuda.host_memory_stats()
    return {"mem_pinned_active_mb": stats.get("active_bytes.current", float("nan")) / MB,
            "mem_pinned_pool_mb": stats.get("allocated_bytes.current", float("nan")) / MB}


# The highest peaks seen before each reset, so that the trial's own peak survives the
# per-step resets: read it with cuda_peaks() rather than torch.cuda.max_memory_allocated().
_PEAKS_BEFORE_RESET = {"allocated_bytes": 0.0, "reserved_bytes": 0.0}


def cuda_peaks(torch: Any, device: Any = None) -> Dict[str, float]:
    """This process's peak allocated and reserved CUDA memory in bytes, over the whole trial."""
    return {"allocated_bytes": max(torch.cuda.max_memory_allocated(device), _PEAKS_BEFORE_RESET["allocated_bytes"]),
            "reserved_bytes": max(torch.cuda.max_memory_reserved(device), _PEAKS_BEFORE_RESET["reserved_bytes"])}


class CudaMemory:
    """Per step: the peak of allocated and reserved CUDA memory, then resets the peaks
    (remembering the highest, for cuda_peaks).

    Reads the caching allocator's counters on the host: no synchronize.
    """

    def __init__(self, device: Any = None):
        import torch

        self._torch = torch
        self._device = torch.device(device or "cuda")
        torch.cuda.init()        # the allocator's counters exist once CUDA is initialised
        torch.cuda.reset_peak_memory_stats(self._device)

    def __call__(self) -> Dict[str, float]:
        stats = self._torch.cuda.memory_stats_as_nested_dict(self._device)
        for name in _PEAKS_BEFORE_RESET:
            _PEAKS_BEFORE_RESET[name] = max(_PEAKS_BEFORE_RESET[name], _peak(stats, name))
        self._torch.cuda.reset_peak_memory_stats(self._device)
        return {"gpu_mem_peak_allocated_mb": _peak(stats, "allocated_bytes") / MB,
                "gpu_mem_peak_reserved_mb": _peak(stats, "reserved_bytes") / MB}


def _peak(stats: Dict[str, Any], name: str) -> float:
    """{} until CUDA is initialised: NaN then, not a KeyError."""
    return float(stats.get(name, {}).get("all", {}).get("peak", float("nan")))


class RssPeak:
    """The highest resident memory of this process inside a `with` block, in MB over its
    start (`peak_mb`): a thread polls RSS every `every_s` (a reading takes microseconds,
    unlike TreeMemory's). For host peaks that a per-step reading would miss, such as
    loading a model's weights."""

    def __init__(self, every_s: float = 0.001):
        import psutil

        self._process, self.every_s = psutil.Process(), every_s
        self.start_mb = self.peak_mb = 0.0
        self._stop = None

    def _rss_mb(self) -> float:
        return self._process.memory_info().rss / MB

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            self._highest = max(self._highest, self._rss_mb())

    def __enter__(self) -> "RssPeak":
        import threading

        self.start_mb = self._highest = self._rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self._highest, self._rss_mb()) - self.start_mb
