"""Cell statistics: one row per cell (a grid point; each of its repeats is one trial process).

A cell's items/s, p50 and p95 (and the workload's headline figures) are the median over its
finished repeats of each repeat's value (repeats.py): the figures the verdicts compare, held
here once. mean, std and cv are over its pooled counted steps. Intervals come from a two-level
bootstrap (repeats, then steps) with 2 or more repeats (`ci_over` = "repeats"); with one repeat
they cover that process's step noise only (`ci_over` = "steps"). Pure over DataFrames.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import bootstrap, overlap, stats
from sweeper.analysis.load import normalise, swept_axes
from sweeper.analysis.repeats import as_float, by_trial, counted, items_of, median, repeat_table
from sweeper.analysis.text import cell_label, short_keys

MEDIANS = ("items_per_s", "p50", "p95")


def cell_table(summary: pd.DataFrame, steps: pd.DataFrame, n_resamples: int = 2000, seed: int = 0,
               repeats: Optional[pd.DataFrame] = None, figures: Sequence[str] = ()) -> pd.DataFrame:
    """One row per cell: swept values, repeats, status, and its figures with intervals."""
    summary = normalise(summary)
    repeats = repeat_table(summary, steps, figures) if repeats is None else repeats
    axes = swept_axes(summary)
    names = short_keys(axes)
    groups = by_trial(steps)      # once, not per cell
    rows = []
    for cell_id, trials in summary.groupby("cell_id", sort=False):
        ok = trials[trials["status"] == "ok"]
        mine = [groups[t] for t in sorted(set(ok["trial_id"])) if t in groups]
        values = {a: trials[a].iloc[0] for a in axes}
        row = {"cell_id": cell_id, "cell": cell_label(values, names) or cell_id, **values,
               "is_baseline": bool(trials["is_baseline"].any()), "repeats": len(ok),
               "failed": int(len(trials) - len(ok)), "status": _status(trials)}
        row.update(_cell_statistics(mine, repeats[repeats["cell_id"] == cell_id], figures, n_resamples, seed))
        row.update(_resource_columns(trials, groups))
        rows.append(row)
    return pd.DataFrame(rows)


def _status(trials: pd.DataFrame) -> str:
    """"ok", the one status all its trials ended with, else "3/5 ok"."""
    statuses = list(trials["status"])
    if len(set(statuses)) == 1:
        return str(statuses[0])
    return f"{statuses.count('ok')}/{len(statuses)} ok"


def _cell_statistics(groups: List[pd.DataFrame], repeats: pd.DataFrame, figures: Sequence[str],
                     n_resamples: int, seed: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"steps": int(sum(len(g) for g in groups))}
    out.update({name: median(repeats[name]) for name in (*MEDIANS, *figures)})
    out.update({name: median(repeats[name]) for name in overlap.COLUMNS})
    if not groups:   # no steps on disk: the summary's figures, without intervals
        out["mean"] = median(repeats["mean"])
        out["ci_over"] = "none"
        return out
    seconds = [g["step_s"].to_numpy(float) for g in groups]
    pooled = stats.describe(np.concatenate(seconds))
    out.update({"mean": pooled.mean, "std": pooled.std, "cv": pooled.cv})
    cis = bootstrap.cell_intervals(seconds, [items_of(g) for g in groups], n_resamples=n_resamples, seed=seed,
                                   repeat_counted=[counted(g) for g in groups])
    for name, (low, high) in cis.items():
        out.update({f"{name}_low": low, f"{name}_high": high})
    measured = sum(1 for s in seconds if np.isfinite(s).any())     # the repeats the intervals drew from
    out["ci_over"] = "repeats" if measured >= 2 else "steps"
    return out


# Peak memory, in GB (1e9 bytes), from the first source a trial has:
#   GPU:  the probe's CUDA peak (gpu_mem_peak_reserved_mb: what the allocator held), or a
#         workload figure peak_gpu_mem_gb;
#   host: the largest per-step sum of PSS over the trial process and its DataLoader
#         workers (mem_main_pss_mb + mem_workers_pss_mb; PSS splits shared pages, so it
#         adds up), else the sum of their maxima (an upper bound), else peak_host_mem_gb.
GPU_MEMORY_MB = ("gpu_mem_peak_reserved_mb", "gpu_mem_peak_allocated_mb")
HOST_MEMORY_MB = ("mem_main_pss_mb", "mem_workers_pss_mb")
MEMORY_COLUMNS = ("gpu_mem_gb", "host_mem_gb")


def trial_memory(row: pd.Series, steps: Optional[pd.DataFrame]) -> Dict[str, float]:
    """{"gpu_mem_gb", "host_mem_gb"} of one trial (NaN when not recorded)."""
    steps = steps if steps is not None else pd.DataFrame()
    main, workers = HOST_MEMORY_MB
    per_step = math.nan
    if main in steps.columns and steps[main].notna().any():
        extra = steps[workers].fillna(0.0) if workers in steps.columns else 0.0
        per_step = float((steps[main] + extra).max())
    maxima = as_float(row.get(f"{main}_max")) + float(np.nan_to_num(as_float(row.get(f"{workers}_max"))))
    host = _first(per_step / 1e3, maxima / 1e3, as_float(row.get("peak_host_mem_gb")))
    gpu = _first(*(_steps_max(steps, c) / 1e3 for c in GPU_MEMORY_MB),
                 *(as_float(row.get(f"{c}_max")) / 1e3 for c in GPU_MEMORY_MB), as_float(row.get("peak_gpu_mem_gb")))
    return {"gpu_mem_gb": gpu, "host_mem_gb": host}


def _first(*values: float) -> float:
    return next((v for v in values if not math.isnan(v)), math.nan)


def _steps_max(steps: pd.DataFrame, column: str) -> float:
    return float(steps[column].max()) if column in steps.columns and steps[column].notna().any() else math.nan


def _resource_columns(trials: pd.DataFrame, groups: Dict[str, pd.DataFrame]) -> Dict[str, float]:
    """Per cell, the worst repeat's peak memory (GB) and the CPUs the trial asked for."""
    ok = trials[trials["status"] == "ok"]
    memory = [trial_memory(row, groups.get(row["trial_id"])) for _, row in ok.iterrows()]
    out = {}
    for name in MEMORY_COLUMNS:
        found = [m[name] for m in memory if not math.isnan(m[name])]
        if found:
            out[name] = float(max(found))
    if "num_cpus" in trials.columns and trials["num_cpus"].notna().any():
        out["num_cpus"] = float(pd.to_numeric(trials["num_cpus"], errors="coerce").max())
    return out


def memory_column(memory: str, cells: pd.DataFrame) -> str:
    """The spec's memory column, else GPU memory when any cell recorded it, else host memory."""
    if memory in MEMORY_COLUMNS:
        return memory
    has_gpu = "gpu_mem_gb" in cells.columns and cells["gpu_mem_gb"].notna().any()
    return "gpu_mem_gb" if has_gpu else "host_mem_gb"
