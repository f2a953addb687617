"""Background utilisation sampler, its sources, and the alignment of samples to steps.

A daemon thread calls each source `probe.sample_hz` times a second (10 by
default) and keeps (time, values) pairs. A second thread takes the probe's
memory readings, which are too slow for the step (about 15 ms per process that
has imported torch, on a 2-core VM): it serves the latest request only, and
after each reading it rests 49 times as long as the reading took, so memory
readings never use more than 2% of one core. A source is any callable that
returns {column: value}; tests pass fakes and call `tick()` with an injected
clock instead of starting the threads.

Alignment (`align`) is done once, when rows are read: a sample taken at t[i]
stands for the interval (t[i-1], t[i]] (rates such as CPU % are measured over
exactly that interval), and a step gets the time-weighted mean of the intervals
its span overlaps. A step shorter than the sampling period therefore carries the
value of the interval it fell in.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

Source = Callable[[], Dict[str, float]]
Clock = Callable[[], int]
MB = 1e6


class Sampler:
    def __init__(self, sources: Sequence[Source], hz: float = 10.0, clock: Clock = time.perf_counter_ns,
                 memory_duty: float = 0.02):
        self.sources = list(sources)
        self.period_s = 1.0 / hz
        self.memory_duty = memory_duty     # the largest share of one core that memory readings may take
        self.clock = clock
        self.samples: List[Tuple[int, Dict[str, float]]] = []
        self.memory: Dict[int, Dict[str, float]] = {}   # step -> reading
        self.errors: List[str] = []
        self.t_begin: Optional[int] = None
        self._request: Optional[Tuple[int, Callable[[], Dict[str, float]]]] = None
        self._wake, self._halt = threading.Event(), threading.Event()
        self._threads: List[threading.Thread] = []

    # -- driven by the thread, or by a test ------------------------------------------
    def prime(self) -> None:
        """First call of every source: rate sources set their counters; values are dropped."""
        self._call_sources()
        self.t_begin = self.clock()

    def tick(self) -> None:
        values = self._call_sources()
        self.samples.append((self.clock(), values))

    def _call_sources(self) -> Dict[str, float]:
        values: Dict[str, float] = {}
        for source in list(self.sources):
            try:
                values.update(source())
            except Exception as exc:   # one broken source (NVML gone, say) must not end the others
                self.sources.remove(source)
                self.errors.append(f"utilisation sampler: dropped {type(source).__name__}: {exc}")
        return values

    def request_memory(self, step: int, reader: Callable[[], Dict[str, float]]) -> None:
        """Ask for a memory reading for `step`; a newer request replaces one not yet served."""
        self._request = (step, reader)
        self._wake.set()

    def serve_memory(self) -> None:
        request, self._request = self._request, None
        if request is not None:
            step, reader = request
            try:
                self.memory[step] = reader()
            except Exception as exc:   # one line for the record, however often it fails
                if not any(e.startswith("memory reading failed") for e in self.errors):
                    self.errors.append(f"memory reading failed (first at step {step}): {type(exc).__name__}: {exc}")

    # -- the threads ------------------------------------------------------------------
    def start(self) -> None:
        self.prime()
        self._threads = [threading.Thread(target=loop, name=f"sweeper-probe-{name}", daemon=True)
                         for name, loop in (("sampler", self._tick_loop), ("memory", self._memory_loop))]
        for thread in self._threads:
            thread.start()

    def _tick_loop(self) -> None:
        due = time.monotonic() + self.period_s
        while not self._halt.wait(max(0.0, due - time.monotonic())):
            self.tick()
            due = max(due + self.period_s, time.monotonic())   # fell behind: do not burst to catch up

    def _memory_loop(self) -> None:
        while not self._halt.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._halt.is_set():
                return
            began = time.monotonic()
            self.serve_memory()
            self._halt.wait((time.monotonic() - began) * (1 / self.memory_duty - 1))

    def stop(self) -> None:
        """Ends the threads and takes a last sample, so the last steps are covered.
        A memory request not yet served is dropped: its workers may be gone."""
        if not self._threads:
            return
        self._halt.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads = []
        self.tick()


# -- alignment ----------------------------------------------------------------------
def align(t_begin: int, times: Sequence[int], values: Sequence[float],
          starts: Sequence[int], ends: Sequence[int]) -> np.ndarray:
    """Per span [start, end): the time-weighted mean of the piecewise-constant sample series.

    Sample i holds values[i] over (times[i-1], times[i]], sample 0 over (t_begin, times[0]].
    NaN samples are left out (their interval goes to the next valid sample); spans outside
    the sampled time get NaN; a span of zero length gets the value at its point.
    """
    t, v = np.asarray(times, dtype=float), np.asarray(values, dtype=float)
    edges = np.concatenate([[float(t_begin)], t])
    keep = np.isfinite(v)
    if not keep.any():
        return np.full(len(starts), np.nan)
    edges = np.concatenate([[edges[0]], edges[1:][keep]])
    v = v[keep]
    cumulative = np.concatenate([[0.0], np.cumsum(v * np.diff(edges))])
    a = np.clip(np.asarray(starts, dtype=float), edges[0], edges[-1])
    b = np.clip(np.asarray(ends, dtype=float), edges[0], edges[-1])
    out = (_integral(edges, v, cumulative, b) - _integral(edges, v, cumulative, a)) / np.where(b > a, b - a, 1.0)
    point = v[np.clip(np.searchsorted(edges, a, side="left") - 1, 0, len(v) - 1)]
    out = np.where(b > a, out, point)
    outside = (np.asarray(ends, dtype=float) < edges[0]) | (np.asarray(starts, dtype=float) > edges[-1])
    return np.where(outside, np.nan, out)


def _integral(edges: np.ndarray, v: np.ndarray, cumulative: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral of the series from edges[0] to x (x within [edges[0], edges[-1]])."""
    i = np.clip(np.searchsorted(edges, x, side="left") - 1, 0, len(v) - 1)
    return cumulative[i] + v[i] * (x - edges[i])


def aligned_columns(sampler: Sampler, starts: Sequence[int], ends: Sequence[int]) -> Dict[str, np.ndarray]:
    """Every sampled column, aligned to the given step spans."""
    samples = list(sampler.samples)
    if sampler.t_begin is None or not samples:
        return {}
    times = [t for t, _ in samples]
    columns = sorted({k for _, values in samples for k in values})
    return {c: align(sampler.t_begin, times, [vals.get(c, np.nan) for _, vals in samples], starts, ends)
            for c in columns}


# -- sources ------------------------------------------------------------------------
def descendants(proc: Any) -> List[Any]:
    """The children of `proc`, recursively, from /proc/<pid>/task/<tid>/children: reads only
    the trial's own subtree. psutil's children(recursive=True) reads /proc/<pid>/stat of every
    process on the host, milliseconds of Python holding the GIL (2.9 ms with 90 processes here,
    more beside a Ray node), and the trial's main thread waits for it. Falls back to psutil
    where the kernel has no such file."""
    import psutil

    found: List[Any] = []
    todo = [proc.pid]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            if pid == proc.pid:           # not Linux, or proc has gone
                return proc.children(recursive=True)
            continue
        kids: set = set()
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids.update(int(k) for k in f.read().split())
            except FileNotFoundError:
                if pid == proc.pid and tid == str(pid):   # a kernel without CONFIG_PROC_CHILDREN
                    return proc.children(recursive=True)
            except OSError:               # the thread ended meanwhile
                continue
        for kid in sorted(kids):
            try:
                found.append(psutil.Process(kid))
                todo.append(kid)
            except psutil.Error:          # exited between listing and opening
                continue
    return found


class ProcessTree:
    """CPU %user and %system of the trial process and its children (percent of one core,
    summed, as `top` shows it: 8 busy workers read about 800), and the bytes the tree
    read: from storage (disk_read_mb_s) and through read calls, page cache included
    (io_read_mb_s); util_workers_cpu_pct is the children alone (the DataLoader workers). The
    children list is refreshed once a second, from the trial's own subtree (descendants: 0.4 ms)."""

    def __init__(self, pid: Optional[int] = None, clock: Clock = time.perf_counter_ns, refresh_s: float = 1.0,
                 exclude_pids: Optional[set] = None):
        import psutil

        self.root = psutil.Process(pid or os.getpid())
        self.exclude_pids = exclude_pids if exclude_pids is not None else set()   # other ranks, helpers
        self.clock, self.refresh_ns = clock, int(refresh_s * 1e9)
        self._procs: List[Any] = []
        self._listed_at: Optional[int] = None
        self._last: Optional[Tuple[int, Dict[int, Tuple[float, float, int, int]]]] = None

    def _tree(self, now: int) -> List[Any]:
        if self._listed_at is None or now - self._listed_at >= self.refresh_ns:
            try:
                self._procs = [self.root] + descendants(self.root)
            except Exception:
                self._procs = [self.root]
            self._listed_at = now
        return self._procs

    def _counters(self, now: int) -> Dict[int, Tuple[float, float, int, int]]:
        counters = {}
        for proc in self._tree(now):
            try:
                cpu, io = proc.cpu_times(), proc.io_counters()
                counters[proc.pid] = (cpu.user, cpu.system, io.read_bytes, getattr(io, "read_chars", 0))
            except Exception:   # exited, or io counters not readable here
                continue
        return counters

    def __call__(self) -> Dict[str, float]:
        now = self.clock()
        counters = self._counters(now)
        last, self._last = self._last, (now, counters)
        if last is None or now <= last[0]:
            return {}
        dt = (now - last[0]) / 1e9
        both = [(counters[p], last[1][p]) for p in counters if p in last[1]]
        delta = [sum(max(0.0, c[i] - l[i]) for c, l in both) for i in range(4)]
        workers = [(counters[p], last[1][p]) for p in counters
                   if p in last[1] and p != self.root.pid and p not in self.exclude_pids]
        busy = sum(max(0.0, c[0] - l[0]) + max(0.0, c[1] - l[1]) for c, l in workers)
        return {"util_cpu_pct": 100 * delta[0] / dt, "util_cpu_sys_pct": 100 * delta[1] / dt,
                # the loader workers alone (user + system): idle workers while the trainer waits
                # mean a shallow queue (sweeper/analysis/pitfalls.py)
                "util_workers_cpu_pct": 100 * busy / dt,
                "disk_read_mb_s": delta[2] / dt / MB, "io_read_mb_s": delta[3] / dt / MB}


class Nvml:
    """GPU utilisation, memory used, SM clock, temperature and power of one GPU through NVML.

    NVML's utilisation is the share of its own last sample period (1/6 s to 1 s,
    by GPU) in which a kernel ran; it says nothing about how full the SMs were.
    """

    def __init__(self, handle: Any):
        import pynvml

        self.nvml, self.handle = pynvml, handle
        self._reads = {
            "util_gpu_pct": lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            "gpu_mem_used_mb": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used / MB,
            "gpu_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "gpu_temp_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "gpu_power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        }

    def __call__(self) -> Dict[str, float]:
        out = {}
        for column, read in list(self._reads.items()):
            try:
                out[column] = float(read())
            except self.nvml.NVMLError:   # not supported on this GPU: stop asking
                del self._reads[column]
        return out


def nvml_handle(device_index: int = 0) -> Any:
    """NVML handle of torch's cuda:<device_index>. NVML ignores CUDA_VISIBLE_DEVICES, so
    match by UUID, falling back to the index CUDA_VISIBLE_DEVICES names."""
    import pynvml
    import torch

    pynvml.nvmlInit()
    uuid = str(getattr(torch.cuda.get_device_properties(device_index), "uuid", "") or "")
    if uuid:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except pynvml.NVMLError:
            pass
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    index = int(visible[device_index]) if device_index < len(visible) and visible[device_index].isdigit() \
        else device_index
    return pynvml.nvmlDeviceGetHandleByIndex(index)
