"""Per-repeat figures: one row per finished trial (a repeat, the unit of evidence).

A repeat's p50, p95 and mean step time are over its counted steps, and its items/s is
measure/rules.py's `throughput` over them; the steps that count are rules.py's `counts`
(neither warm-up nor aborted), the rule the probe applies to the record. Pure over DataFrames.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import overlap, stats
from sweeper.analysis.load import normalise
from sweeper.measure.rules import counted_mask, counted_seconds, throughput

FIGURES = ("p50", "p95", "mean", "items_per_s", "steps")


def measured_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps the figures are over: those that count (rules.counts: no warm-up, no aborted step)."""
    if steps.empty or "step_s" not in steps.columns:
        return pd.DataFrame(columns=["trial_id", "step_s"])
    mask = counted_mask(steps["warmup"] if "warmup" in steps else None,
                        steps["aborted"] if "aborted" in steps else None, len(steps))
    return steps[mask]


def counted(steps: pd.DataFrame) -> np.ndarray:
    """The seconds a trial's items/s counts: its steps' cycles (docs/measurement.md)."""
    return counted_seconds(steps["step_s"].to_numpy(float),
                           steps["cycle_s"].to_numpy(float) if "cycle_s" in steps.columns else None)


def items_of(steps: pd.DataFrame) -> np.ndarray:
    return steps["items"].to_numpy(float) if "items" in steps.columns else np.full(len(steps), np.nan)


def by_trial(steps: pd.DataFrame) -> Dict[str, pd.DataFrame]:
    """Each trial's counted steps."""
    measured = measured_steps(steps)
    return dict(tuple(measured.groupby("trial_id"))) if not measured.empty else {}


def repeat_table(summary: pd.DataFrame, steps: pd.DataFrame, figures: Sequence[str] = ()) -> pd.DataFrame:
    """One row per finished trial: cell, repeat, p50, p95, mean step time, items/s, and the
    workload's `figures` (headline keys). From the trial's counted steps when they are there,
    else its summary row (the probe's figures over the same steps)."""
    summary = normalise(summary)
    ok = summary[summary["status"] == "ok"]
    groups = by_trial(steps)
    rows = []
    for row in ok.to_dict("records"):
        rows.append({"trial_id": row["trial_id"], "cell_id": row["cell_id"], "repeat": row["repeat"],
                     "is_baseline": row["is_baseline"], "started_at": row.get("started_at"),
                     **_repeat_figures(row, groups.get(row["trial_id"])),
                     **{k: as_float(row.get(k)) for k in figures},
                     **{k: math.nan for k in overlap.COLUMNS}, **overlap.trial_overlap(row)})
    columns = ["trial_id", "cell_id", "repeat", "is_baseline", "started_at", *FIGURES,
               *(k for k in figures if k not in FIGURES), *overlap.COLUMNS]
    return pd.DataFrame(rows, columns=list(dict.fromkeys(columns)))


def _repeat_figures(row: Dict[str, Any], steps: Optional[pd.DataFrame]) -> Dict[str, float]:
    if steps is None or steps.empty:
        return {"p50": as_float(row.get("step_p50_s")), "p95": as_float(row.get("step_p95_s")),
                "mean": as_float(row.get("step_mean_s")), "items_per_s": as_float(row.get("items_per_s")),
                "steps": as_float(row.get("steps"))}
    seconds = steps["step_s"].to_numpy(dtype=float)
    return {"p50": stats.percentile(seconds, 50), "p95": stats.percentile(seconds, 95),
            "mean": float(np.mean(seconds)), "items_per_s": throughput(items_of(steps), counted(steps)),
            "steps": float(seconds.size)}


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def median(values) -> float:
    """A cell's figure from its repeats' values: their median, failed (NaN) repeats left out."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else math.nan


def values(repeats: pd.DataFrame, cell_id: str, column: str) -> np.ndarray:
    """One cell's repeats' values of a repeat-table column."""
    return repeats.loc[repeats["cell_id"] == cell_id, column].to_numpy(dtype=float)
