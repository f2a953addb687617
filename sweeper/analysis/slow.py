"""Slow repeats: the one rule for a repeat that a busy machine slowed.

A busy machine slows a repeat; it never speeds one up. A repeat is slow when its value lies
SLOW_SPREADS typical spreads, and at least SLOW_AT_LEAST, below its cell's median (items/s;
above it for a latency). The typical spread is the median distance of every repeat from its
cell's median, over all the cells given, so one slow repeat cannot hide itself by widening it;
from LEAVE_OUT_FROM repeats on, also the cell's own, so a cell noisy by itself is not trimmed.

Two readers, one rule: the analysis names slow repeats in a note (findings.slow_repeats), and
repeats=auto's looks leave them out (sequential.Evidence), because on the log scale one such
value inflates a stratum's pooled variance until every cell stops as "no detectable change". In
a smaller cell which value is the slow one cannot be told (and leaving the lower out would
flatter a merely noisy cell), so a look keeps them, leaves that cell out of the stratum's noise,
and does not stop it for futility until it has LEAVE_OUT_FROM repeats. Pure: arrays of log
values in, masks out.
"""
from __future__ import annotations

import math
from typing import Dict, FrozenSet, Mapping, Tuple

import numpy as np

SLOW_SPREADS = 5.0
SLOW_AT_LEAST = 0.15
LEAVE_OUT_FROM = 4                 # repeats a cell needs before a look leaves its slow one out


def slow_masks(logs: Mapping[str, np.ndarray], higher_is_better: bool = True) -> Dict[str, np.ndarray]:
    """cell -> which of its repeats (log values) are slow; a cell of fewer than two has none."""
    sign = 1.0 if higher_is_better else -1.0
    below = {c: sign * (np.median(x) - x) if x.size >= 2 else np.zeros(x.size) for c, x in logs.items()}
    compared = [np.abs(below[c]) for c, x in logs.items() if x.size >= 2]
    if not compared:
        return {c: np.zeros(x.size, dtype=bool) for c, x in logs.items()}
    typical = float(np.median(np.concatenate(compared)))
    floor = -math.log1p(-SLOW_AT_LEAST)
    return {c: below[c] > max(SLOW_SPREADS * max(typical, _own_spread(below[c])), floor) for c in logs}


def _own_spread(below: np.ndarray) -> float:
    """A cell's own typical spread (its median distance from its median), from LEAVE_OUT_FROM
    repeats on: a cell or baseline noisier than its stratum is not trimmed for its own noise.
    Below that the median distance is set by the slow value itself (with two, half their gap)."""
    return float(np.median(np.abs(below))) if below.size >= LEAVE_OUT_FROM else 0.0


def leave_out(logs: Mapping[str, np.ndarray], higher_is_better: bool = True) -> Tuple[Dict[str, np.ndarray], FrozenSet[str]]:
    """(each cell's log values without its slow repeats, the cells of two with a slow-looking
    value): what a look of repeats=auto judges, and the cells whose noise it cannot know yet."""
    masks = slow_masks(logs, higher_is_better)
    kept = {c: x[~masks[c]] if x.size >= LEAVE_OUT_FROM else x for c, x in logs.items()}
    return kept, frozenset(c for c, x in logs.items() if masks[c].any() and x.size < LEAVE_OUT_FROM)
