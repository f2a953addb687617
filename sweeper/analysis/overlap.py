"""The overlap projection: what a step would take if loading and computing overlapped perfectly.

A trial that times a data phase and a compute phase in each step (the probe's phase
columns) ran them one after the other. Perfect overlap (a prefetching loader and
non-blocking copies that keep up) would make the step the longer of the two:

    data     = mean data_wait + h2d per measured step
    compute  = mean forward + backward + optimizer + comm per measured step
    serial   = data + compute                  (what was measured)
    ideal    = max(data, compute)              (perfect overlap)
    saving   = (serial - ideal) / step         (the share of the step overlap could save)

Means, not medians: means add up to the step, and a prefetching pipeline is bound by
the average rate of each side, not by the typical step. A trial with no compute phase
(the DataLoader workload, which only loads) or no data phase gets no projection.
Pure: plain dicts and numbers; computed once per trial (`trial_overlap`, from the
trial's summary), aggregated per cell in the Analysis (cells.py).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional

DATA_PHASES = ("data_wait", "h2d")
COMPUTE_PHASES = ("forward", "backward", "optimizer", "comm", "compute")
COLUMNS = ("overlap_data_s", "overlap_compute_s", "overlap_serial_s", "overlap_ideal_s", "overlap_saving")
# The loader is "hidden" when it costs less than the smallest change the analysis calls a
# change (analysis.min_effect, 5% by default): removing it could not be told from noise.


def _mean(summary: Mapping[str, Any], phase: str) -> Optional[float]:
    value = summary.get(f"phase_{phase}_mean_s")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _total(summary: Mapping[str, Any], phases) -> Optional[float]:
    found = [v for v in (_mean(summary, p) for p in phases) if v is not None]
    return sum(found) if found else None


def trial_overlap(summary: Mapping[str, Any]) -> Dict[str, float]:
    """{overlap_data_s, overlap_compute_s, overlap_serial_s, overlap_ideal_s, overlap_saving} of one
    trial from its summary figures (phase_<name>_mean_s, step_mean_s); {} without both phases."""
    data, compute = _total(summary, DATA_PHASES), _total(summary, COMPUTE_PHASES)
    if data is None or compute is None:
        return {}
    step = _float(summary.get("step_mean_s"))
    serial, ideal = data + compute, max(data, compute)
    step = step if step > 0 else serial
    return {"overlap_data_s": data, "overlap_compute_s": compute, "overlap_serial_s": serial,
            "overlap_ideal_s": ideal, "overlap_saving": (serial - ideal) / step if step > 0 else math.nan}


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def loader_words(cell: Mapping[str, Any], min_effect: float) -> Optional[str]:
    """"the loader is hidden (...)" or "the loader costs N% of the step; ..." for one cell's
    medians, or None when the cell has no projection."""
    data, step = _float(cell.get("overlap_data_s")), _float(cell.get("mean"))
    if not math.isfinite(data):
        return None
    step = step if step > 0 else _float(cell.get("overlap_serial_s"))
    share = data / step if step > 0 else math.nan
    serial, ideal = _float(cell.get("overlap_serial_s")), _float(cell.get("overlap_ideal_s"))
    saving = _float(cell.get("overlap_saving"))
    if share < min_effect:
        return (f"the loader is hidden: data phases take {share * 100:.1f}% of the step "
                f"(below analysis.min_effect={min_effect * 100:g}%)")
    bound = "the loader" if data > _float(cell.get("overlap_compute_s")) else "compute"
    return (f"the loader costs {share * 100:.0f}% of the step; perfect overlap would take data + compute from "
            f"{serial * 1e3:.2f} to {ideal * 1e3:.2f} ms a step (saving {saving * 100:.0f}% of the step; "
            f"{bound} would bound it)")
