"""Pure rules over the probe's numbers: when warm-up ends, which steps count, what items/s is,
when memory grows, when phases fit.

No clocks, no threads, no torch: each rule is a function of plain lists, tested
as a table of cases in tests/test_probe.py. docs/measurement.md states each rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

# Phases may not add up to more than their step by more than this. On the host
# clock each boundary is its own clock read, on the GPU each is an event with
# about 0.5 us resolution: 20 us or 1% covers both with room to spare, and
# anything past it means phases overlap (nested, or timed on two streams).
SUM_TOLERANCE_REL = 0.01
SUM_TOLERANCE_ABS_S = 20e-6


def phase_sum_tolerance_s(step_s: float) -> float:
    return max(SUM_TOLERANCE_ABS_S, SUM_TOLERANCE_REL * step_s)


def phases_fit(step_s: float, phase_sum_s: float) -> bool:
    """True when the named phases fit inside their step (within the tolerance)."""
    return phase_sum_s <= step_s + phase_sum_tolerance_s(step_s)


# -- warm-up that ends when step time has settled -------------------------------------
@dataclass(frozen=True)
class SettleRule:
    window: int = 10          # W: steps per median
    tolerance: float = 0.05   # X: largest relative change between two windows' medians
    min_steps: int = 0        # warm-up never ends before this many steps (workload.warmup_steps)
    max_steps: int = 200      # cap: warm-up ends here even if the step time never settles


def settle_verdict(step_s: Sequence[float], rule: SettleRule) -> Optional[str]:
    """After len(step_s) steps: "settled", "cap" (warm-up ends either way) or None (not yet).

    Settled: the median of the last W steps differs from the median of the W steps
    before them by at most X, relative to the earlier median.
    """
    n = len(step_s)
    if n >= max(rule.min_steps, 2 * rule.window):
        earlier = float(np.median(step_s[n - 2 * rule.window:n - rule.window]))
        latest = float(np.median(step_s[n - rule.window:]))
        if abs(latest - earlier) <= rule.tolerance * earlier:
            return "settled"
    if n >= max(rule.max_steps, rule.min_steps):
        return "cap"
    return None


# -- steadily growing memory ----------------------------------------------------------
@dataclass(frozen=True)
class Growth:
    mb_per_100_steps: float   # least-squares slope
    r2: float                 # how well a straight line fits (1: perfectly)
    readings: int
    first_step: int
    last_step: int


def linear_growth(steps: Sequence[float], mb: Sequence[float]) -> Optional[Growth]:
    """Least-squares line through (step, MB) readings; None with fewer than two distinct steps."""
    x, y = np.asarray(steps, dtype=float), np.asarray(mb, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(np.unique(x)) < 2:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - (slope * x + intercept)) ** 2).sum())
    r2 = 1.0 if ss_tot == 0 else 1.0 - ss_res / ss_tot
    return Growth(float(slope * 100), r2, len(x), int(x.min()), int(x.max()))


@dataclass(frozen=True)
class GrowthRule:
    mb_per_100_steps: float = 10.0   # N: smallest slope that counts as growth
    min_r2: float = 0.8              # a good fit: steady growth, not one jump or noise
    min_readings: int = 5


def is_growing(growth: Optional[Growth], rule: GrowthRule) -> bool:
    return (growth is not None and growth.readings >= rule.min_readings
            and growth.mb_per_100_steps >= rule.mb_per_100_steps and growth.r2 >= rule.min_r2)


def growth_warning(what: str, growth: Growth) -> str:
    return (f"{what} grew steadily: {growth.mb_per_100_steps:+.1f} MB per 100 steps "
            f"(R^2 {growth.r2:.2f} over {growth.readings} readings, steps {growth.first_step}-"
            f"{growth.last_step}); look for a leak or copy-on-read growth in the dataset")


def cycle_seconds(t_start_s: Sequence[Optional[float]], step_s: Sequence[float],
                  count_between_steps: bool = True) -> list:
    """Each step's cycle: from its start to the next step's start, so the time between steps
    (the probe's bookkeeping, the workload's own) is counted; a prefetching loader keeps
    working then, and a loop timed by the wall clock counts it too. Its own time where the
    gap is unknown (the last step, an aborted neighbour) or is not to be counted."""
    out = []
    for i, seconds in enumerate(step_s):
        start = t_start_s[i]
        nxt = t_start_s[i + 1] if i + 1 < len(t_start_s) else None
        known = count_between_steps and start is not None and nxt is not None
        out.append(max(float(seconds), float(nxt) - float(start)) if known else float(seconds))
    return out


def counted_seconds(step_s: Sequence[float], cycle_s: Optional[Sequence[Optional[float]]] = None) -> np.ndarray:
    """The seconds a step's items are counted over (items_per_s = items / their sum): its cycle
    where the probe recorded one, else its own time (results written before cycles were)."""
    steps = np.asarray(step_s, dtype=float)
    if cycle_s is None:
        return steps
    cycles = np.array(cycle_s, dtype=float)        # None reads as NaN
    return np.where(np.isnan(cycles), steps, cycles)


# -- which steps count --------------------------------------------------------------------
def counts(step: Mapping[str, Any]) -> bool:
    """Whether a step counts in a trial's figures: neither warm-up nor aborted. An aborted step
    raised, or its device timings could not be read back, so it holds only a partial host time."""
    return not step.get("warmup") and not step.get("aborted")


def counted_mask(warmup: Optional[Sequence[Any]], aborted: Optional[Sequence[Any]], n: int) -> np.ndarray:
    """`counts` over n steps' columns (a column may be absent: None; a missing flag reads False)."""
    def flag(values: Optional[Sequence[Any]]) -> np.ndarray:
        if values is None:
            return np.zeros(n, dtype=bool)
        return np.nan_to_num(np.asarray(values, dtype=float)) != 0     # None and NaN read as False
    return ~(flag(warmup) | flag(aborted))


# -- items per second ---------------------------------------------------------------------
def items_per_second(items: Any, seconds: Any, axis: int = -1) -> Any:
    """A trial's throughput: its counted steps' items over their counted seconds
    (`counted_seconds`), total over total. Vectorised over `axis`, for the bootstrap's draws."""
    return np.sum(items, axis=axis) / np.sum(seconds, axis=axis)


def throughput(items: Sequence[Optional[float]], seconds: Sequence[float]) -> float:
    """`items_per_second` of one trial, NaN when a step has no item count or no time was counted."""
    i, s = np.asarray(items, dtype=float), np.asarray(seconds, dtype=float)
    if i.size != s.size or np.isnan(i).any() or not s.sum() > 0:
        return float("nan")
    return float(items_per_second(i, s))
