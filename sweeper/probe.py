"""The measuring object that workloads call: per-step phase timings.

    with probe.step(items=batch_size):
        with probe.phase("data_wait"):
            batch = next(it)
        with probe.phase("h2d"):
            batch = batch.to(device)

Each step becomes one row: its index, whether it is warm-up, its total time,
one column per phase, "other" (the step's time outside any phase) and any
values given to `record`. Warm-up steps are kept and flagged; statistics leave
them out. The clock is injected so tests can drive it.

This module imports neither torch nor Ray: a workload can be run from a
notebook with a probe of its own.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np

Clock = Callable[[], int]  # nanoseconds


class Probe:
    def __init__(self, warmup_steps: int = 0, clock: Clock = time.perf_counter_ns):
        self.warmup_steps = warmup_steps
        self.clock = clock
        self.figures: Dict[str, Any] = {}      # trial-level: time to first batch, threads, ...
        self.warnings: List[str] = []
        self._rows: List[Dict[str, Any]] = []
        self._current: Optional[Dict[str, Any]] = None
        self._t0 = clock()

    # -- recording ---------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, items: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        index = len(self._rows)
        row: Dict[str, Any] = {"step": index, "warmup": index < self.warmup_steps, "items": items}
        self._current = row
        start = self.clock()
        try:
            yield row
        finally:
            end = self.clock()
            self._current = None
            row["t_start_s"] = (start - self._t0) / 1e9
            row["step_s"] = (end - start) / 1e9
            phases = sum(v for k, v in row.items() if k.startswith("phase_"))
            row["phase_other_s"] = max(0.0, row["step_s"] - phases)
            self._rows.append(row)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            elapsed = (self.clock() - start) / 1e9
            if self._current is not None:
                key = f"phase_{name}_s"
                self._current[key] = self._current.get(key, 0.0) + elapsed

    def record(self, **values: Any) -> None:
        """Extra per-step values (loss, bytes moved, ...) on the step in progress."""
        if self._current is None:
            raise RuntimeError("probe.record() is only valid inside probe.step()")
        self._current.update(values)

    def set_figure(self, name: str, value: Any) -> None:
        self.figures[name] = value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    @contextlib.contextmanager
    def timed_figure(self, name: str) -> Iterator[None]:
        """Times a one-off event (such as the first batch) into a trial-level figure."""
        start = self.clock()
        try:
            yield
        finally:
            self.figures[name] = (self.clock() - start) / 1e9

    # -- reading -----------------------------------------------------------------
    @property
    def rows(self) -> List[Dict[str, Any]]:
        return list(self._rows)

    def measured(self) -> List[Dict[str, Any]]:
        return [r for r in self._rows if not r["warmup"]]

    def summary(self) -> Dict[str, Any]:
        """Figures over the measured (non-warm-up) steps."""
        rows = self.measured()
        out: Dict[str, Any] = {"steps": len(rows), "warmup_steps": len(self._rows) - len(rows)}
        if not rows:
            return out
        step_s = np.array([r["step_s"] for r in rows])
        out.update(_spread("step", step_s))
        items = [r["items"] for r in rows if r.get("items") is not None]
        if len(items) == len(rows) and step_s.sum() > 0:
            out["items_per_s"] = float(np.sum(items) / step_s.sum())
        for key in sorted({k for r in rows for k in r if k.startswith("phase_")}):
            values = np.array([r.get(key, 0.0) for r in rows])
            out.update(_spread(key[:-2], values))
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
