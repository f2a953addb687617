"""The measuring object that workloads call: per-step phases, memory and utilisation.

    with probe:                                  # starts the sampler and any profile
        while probe.more(steps):                 # warm-up first, then `steps` measured steps
            with probe.step(items=batch_size):
                with probe.phase("data_wait"):
                    batch = next(it)
                with probe.phase("h2d"):
                    batch = batch.to(device, non_blocking=True)
                ...

Each step becomes one row: its index, whether it is warm-up, its total time,
one column per phase, "other" (the step's time outside any phase), memory and
utilisation columns, and any values given to `record`. Warm-up steps are kept
and flagged; statistics leave them out. docs/measurement.md lists the columns.

On the CPU phases are timed with the host clock; on a GPU with CUDA events in
stream order, read back a few steps later (`lag`), so timing adds no
synchronize to the step. The clock, timer, sampler and readers are injected, so
tests drive all of it without a GPU. This module imports neither torch nor Ray:
a workload can be run from a notebook with a probe of its own.
"""
from __future__ import annotations

import collections
import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

import numpy as np

from sweeper.measure.profiles import Profile
from sweeper.measure.rules import (GrowthRule, SettleRule, counted_seconds, counts, cycle_seconds, growth_warning,
                                   is_growing, linear_growth, phases_fit, settle_verdict, throughput)
from sweeper.measure.sampler import Sampler, aligned_columns
from sweeper.measure.timers import Clock, HostTimer
from sweeper.standby import LOCKS, wait_before_measuring

# The phases workloads use; any other name works too and gets its own column.
PHASES = ("data_wait", "h2d", "forward", "backward", "optimizer", "comm")
DEVICE_LAG = 8   # a CUDA event is read back once it is this many steps old: long done by then
Reader = Callable[[], Dict[str, float]]


@dataclass
class _Pending:
    """A step whose marks may not be readable yet (CUDA events still in the stream)."""
    row: Dict[str, Any]
    start: Any
    end: Any
    phases: List[Tuple[str, Any, Any]] = field(default_factory=list)


class Probe:
    def __init__(self, warmup_steps: int = 0, clock: Clock = time.perf_counter_ns, *,
                 timer: Any = None, sampler: Optional[Sampler] = None,
                 memory: Optional[Reader] = None, memory_every: int = 10,
                 cuda_memory: Optional[Reader] = None, settle: Optional[SettleRule] = None,
                 growth: GrowthRule = GrowthRule(), profile: Optional[Profile] = None,
                 nvtx: Any = None, lag: Optional[int] = None):
        self.warmup_steps, self.clock = warmup_steps, clock
        self.timer = timer if timer is not None else HostTimer(clock)
        self.lag = lag if lag is not None else (DEVICE_LAG if self.timer.lazy else 0)
        self.sampler, self.memory, self.memory_every = sampler, memory, memory_every
        self.cuda_memory, self.settle, self.growth = cuda_memory, settle, growth
        self.profile = profile or Profile()
        self.nvtx = nvtx if self.profile.nvtx else None
        self.figures: Dict[str, Any] = {}      # trial-level: time to first batch, threads, ...
        self.out_dir: Optional[Path] = None    # the trial folder's scratch: files written here come back with it
        self.warnings: List[str] = []
        # False: what the workload does between steps is its own preparation (dataset_access draws
        # its positions there), not the cost under test, so items_per_s counts step time only
        self.count_between_steps = True
        self._rows: List[Dict[str, Any]] = []
        self._pending: Deque[_Pending] = collections.deque()
        self._memory: Dict[int, Dict[str, float]] = {}   # readings taken in the step, by step
        self._current: Optional[_Pending] = None
        self._count = 0
        self._warmup_end: Optional[int] = None if settle else warmup_steps
        self._warm_step_s: List[float] = []
        self._state = "new"
        self._t0 = clock()

    @classmethod
    def for_trial(cls, cfg: Any, device: str, warmup_steps: int, out_dir: Optional[Path] = None) -> "Probe":
        """The real probe for a trial: `cfg` is a ProbeConfig, `device` the resolved device."""
        from sweeper.measure.build import probe_parts

        parts, warnings = probe_parts(cfg, device, warmup_steps, out_dir)
        probe = cls(warmup_steps, **parts)
        probe.warnings.extend(warnings)
        probe.out_dir = Path(out_dir) if out_dir is not None else None
        return probe

    # -- lifetime ----------------------------------------------------------------------
    def start(self) -> "Probe":
        if self._state == "new":
            self._state = "running"
            if self.sampler is not None:
                self.sampler.start()
            self.profile.start()
            if not self.profile.nvtx:      # the profile found no tool to read NVTX ranges
                self.nvtx = None
        return self

    def stop(self) -> None:
        """Stops the sampler and profile, reads back every timing, checks memory growth."""
        if self._state == "stopped":
            return
        self._state = "stopped"
        self.profile.stop()
        if self.sampler is not None:
            self.sampler.stop()
        for line in (self.sampler.errors if self.sampler is not None else []) + self.profile.warnings:
            self.warn(line)
        self._resolve(keep=0)
        self._check_growth()

    def __enter__(self) -> "Probe":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def more(self, steps: int) -> bool:
        """True until `steps` measured steps have run after the warm-up."""
        if self._warmup_end is None:
            return True
        return self._count - self._warmup_end < steps

    # -- recording ---------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, items: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        index = self._count
        if index == self.warmup_steps and os.environ.get(LOCKS):    # the first step that may be measured
            wait_before_measuring(self.figures, self.warn)
        row: Dict[str, Any] = {"step": index, "items": items}
        self._push(f"step {index}")
        host_start = self.clock()
        pending = _Pending(row, self.timer.mark(), None)
        self._current = pending
        ok = False
        try:
            yield row
            ok = True
        finally:
            pending.end = self.timer.mark()
            host_end = self.clock()
            self._pop()
            self._current = None
            self._count += 1
            self._end_step(pending, host_start, host_end, ok)

    def _end_step(self, pending: _Pending, host_start: int, host_end: int, ok: bool) -> None:
        row, index = pending.row, pending.row["step"]
        row["host_step_s"] = (host_end - host_start) / 1e9
        if self.cuda_memory is not None:
            row.update(self.cuda_memory())
        if self.profile.name != "none":
            row["profiled"] = self.profile.profiled(index)
        if not ok:
            row["aborted"] = True
        self._read_memory(index)
        self._pending.append(pending)
        self.profile.step(index)
        self._resolve(keep=self.lag)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        current = self._current
        if current is None:        # outside a step: nothing to attribute it to
            yield
            return
        self._push(name)
        start = self.timer.mark()
        try:
            yield
        finally:
            current.phases.append((name, start, self.timer.mark()))
            self._pop()

    def record(self, **values: Any) -> None:
        """Extra per-step values (loss, bytes moved, ...) on the step in progress. A tensor
        (a loss still on the GPU) is read back with the step's timings, so recording needs no sync."""
        if self._current is None:
            raise RuntimeError("probe.record() is only valid inside probe.step()")
        self._current.row.update(values)

    def set_figure(self, name: str, value: Any) -> None:
        self.figures[name] = value

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    @contextlib.contextmanager
    def timed_figure(self, name: str) -> Iterator[None]:
        """Times a one-off event (such as the first batch) into a trial-level figure."""
        start = self.clock()
        try:
            yield
        finally:
            self.figures[name] = (self.clock() - start) / 1e9

    def exclude_process(self, pid: int) -> None:
        """A child of the trial that is not a DataLoader worker (another rank, a helper):
        left out of the mem_workers_* columns."""
        excluded = getattr(self.memory, "exclude_pids", None)
        if excluded is not None:
            excluded.add(pid)

    def _push(self, name: str) -> None:
        if self.nvtx is not None:
            self.nvtx.range_push(name)

    def _pop(self) -> None:
        if self.nvtx is not None:
            self.nvtx.range_pop()

    # -- memory --------------------------------------------------------------------------
    def _read_memory(self, index: int) -> None:
        """Host memory every `memory_every` steps: in the sampler thread when there is one
        (a reading costs milliseconds), else here."""
        if self.memory is None or self.memory_every <= 0 or index % self.memory_every:
            return
        if self.sampler is not None and self._state == "running":
            self.sampler.request_memory(index, self.memory)
        else:
            self._memory[index] = self.memory()

    def _memory_readings(self) -> Dict[int, Dict[str, float]]:
        readings = dict(self.sampler.memory) if self.sampler is not None else {}
        readings.update(self._memory)
        return readings

    def _check_growth(self) -> None:
        readings = self._memory_readings()
        measured = [r["step"] for r in self._rows if counts(r)]
        points = [(s, readings[s]["mem_workers_uss_mb"]) for s in measured
                  if s in readings and readings[s].get("mem_workers_n", 0) > 0]
        growth = linear_growth([p[0] for p in points], [p[1] for p in points])
        if growth is not None:   # the fit's quality too, so the analysis can apply the same rule (pitfalls.py)
            self.figures["mem_workers_uss_growth_mb_per_100_steps"] = growth.mb_per_100_steps
            self.figures["mem_workers_uss_growth_r2"] = growth.r2
            self.figures["mem_workers_uss_growth_readings"] = growth.readings
        if is_growing(growth, self.growth):
            self.warn(growth_warning("DataLoader worker memory (USS, all workers)", growth))

    # -- reading back timings ---------------------------------------------------------------
    def _resolve(self, keep: int) -> None:
        """Turns pending steps into rows, oldest first, until `keep` are left pending."""
        while len(self._pending) > keep:
            pending = self._pending.popleft()
            row = pending.row
            if not row.get("aborted"):
                try:
                    self._fill_times(pending)
                except Exception as exc:   # a CUDA error after a failed step: keep the host time
                    row["aborted"] = True
                    self.warn(f"step timings could not be read back ({type(exc).__name__}); host times kept")
            if row.get("aborted"):      # the device may be in an error state: host time only
                row.update(t_start_s=None, step_s=row["host_step_s"])
            _read_back_values(row)
            marks = [pending.start, pending.end] + [m for _, a, b in pending.phases for m in (a, b)]
            self.timer.release(marks)
            self._mark_warmup(row)
            self._rows.append(row)

    def _fill_times(self, pending: _Pending) -> None:
        self.timer.wait(pending.end)   # every earlier mark of the step is done once its end is
        row = pending.row
        step_s = self.timer.elapsed_ns(pending.start, pending.end) / 1e9
        row["t_start_s"] = (self.timer.at_ns(pending.start) - self._t0) / 1e9
        row["step_s"] = step_s
        total = 0.0
        for name, a, b in pending.phases:
            seconds = self.timer.elapsed_ns(a, b) / 1e9
            row[f"phase_{name}_s"] = row.get(f"phase_{name}_s", 0.0) + seconds
            total += seconds
        row["phase_other_s"] = max(0.0, step_s - total)
        if not phases_fit(step_s, total):
            row["phases_overlap"] = True
            self.warn("phases add up to more than their step in some steps (column phases_overlap; tolerance "
                      "1% or 20 us): nested or overlapping probe.phase() blocks are counted twice")

    def _mark_warmup(self, row: Dict[str, Any]) -> None:
        if self._warmup_end is not None:
            row["warmup"] = row["step"] < self._warmup_end
            return
        row["warmup"] = True            # settling: warm-up until the rule says otherwise
        self._warm_step_s.append(row["step_s"])
        verdict = settle_verdict(self._warm_step_s, self.settle)
        if verdict is not None:
            self._warmup_end = row["step"] + 1
            self.figures["warmup_steps_settled"] = self._warmup_end
        if verdict == "cap":
            self.warn(f"probe.settle: step time had not settled after {self._warmup_end} steps "
                      f"(probe.settle_max_steps); measuring from there anyway")

    # -- reading ---------------------------------------------------------------------------
    @property
    def rows(self) -> List[Dict[str, Any]]:
        """Every step so far (reads back any pending timings), with memory and sampler columns."""
        self._resolve(keep=0)
        rows = [dict(r) for r in self._rows]
        cycles = cycle_seconds([r.get("t_start_s") for r in rows], [r["step_s"] for r in rows],
                               self.count_between_steps)
        for row, cycle in zip(rows, cycles):
            row["cycle_s"] = cycle
        readings = self._memory_readings()
        for row in rows:
            row.update(readings.get(row["step"], {}))
        self._add_utilisation(rows)
        return rows

    def _add_utilisation(self, rows: List[Dict[str, Any]]) -> None:
        spans = [r for r in rows if r.get("t_start_s") is not None]
        if self.sampler is None or not spans:
            return
        starts = [self._t0 + int(r["t_start_s"] * 1e9) for r in spans]
        ends = [s + int(r["step_s"] * 1e9) for s, r in zip(starts, spans)]
        for column, values in aligned_columns(self.sampler, starts, ends).items():
            for row, value in zip(spans, values):
                row[column] = float(value)

    def measured(self, rows: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
        return [r for r in (self.rows if rows is None else rows) if counts(r)]

    def summary(self, rows: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        """Figures over the measured (non-warm-up) steps; `rows`: self.rows, when already read."""
        rows = self.measured(rows)
        out: Dict[str, Any] = {"steps": len(rows), "warmup_steps": sum(1 for r in self._rows if r["warmup"])}
        if not rows:
            return out
        step_s = np.array([r["step_s"] for r in rows])
        out.update(_spread("step", step_s))
        rate = throughput([r.get("items") for r in rows], counted_seconds(step_s, [r.get("cycle_s") for r in rows]))
        if not math.isnan(rate):
            out["items_per_s"] = rate
        for key in sorted({k for r in rows for k in r if k.startswith("phase_") and k.endswith("_s")}):
            values = np.array([r.get(key, 0.0) for r in rows])
            out.update(_spread(key[:-2], values))
        if any("phase_data_wait_s" in r for r in rows) and step_s.sum() > 0:
            out["data_wait_share"] = float(sum(r.get("phase_data_wait_s", 0.0) for r in rows) / step_s.sum())
        out.update(_column_figures(rows))
        return out


# Columns summarised by their mean (rates, utilisation) or their maximum (memory).
_MEAN_PREFIXES = ("util_", "gpu_power", "gpu_sm_clock", "gpu_temp", "disk_read", "io_read")
_MAX_PREFIXES = ("mem_", "gpu_mem_")


def _column_figures(rows: List[Dict[str, Any]]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    # only the summarised columns: a workload's own columns may hold text (a note, a tag)
    keys = sorted({k for r in rows for k in r if k.startswith(_MEAN_PREFIXES + _MAX_PREFIXES)})
    for key in keys:
        values = np.array([r.get(key, np.nan) for r in rows], dtype=float)
        if not np.isfinite(values).any():
            continue
        if key.startswith(_MEAN_PREFIXES):
            out[f"{key}_mean"] = float(np.nanmean(values))
        elif key.startswith(_MAX_PREFIXES):
            out[f"{key}_max"] = float(np.nanmax(values))
    return out


def _spread(name: str, values: np.ndarray) -> Dict[str, float]:
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
    return {
        f"{name}_p50_s": float(np.percentile(values, 50)),
        f"{name}_p95_s": float(np.percentile(values, 95)),
        f"{name}_mean_s": mean,
        f"{name}_std_s": std,
        f"{name}_cv": std / mean if mean > 0 else float("nan"),
    }


def _read_back_values(row: Dict[str, Any]) -> None:
    """Recorded tensors become numbers; by now their step has finished on the device."""
    for key, value in row.items():
        if hasattr(value, "item") and not isinstance(value, (int, float)):
            try:
                row[key] = float(value.item())
            except Exception:    # the device is in an error state after a failed step
                row[key] = None
