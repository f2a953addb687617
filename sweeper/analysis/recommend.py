"""The best configuration of a run, under optional resource constraints.

Picks among cells that finished and respect the constraints (analysis.constraints):
the one detectably faster than the baseline with the largest gain; when none is,
the baseline itself, naming the best point estimate and why it was not chosen.
A constraint whose figure the run did not record is ignored, and said so.

When the items per step differ between cells (batch size swept), step times are
not comparable, so cells are ranked by time per item (1 / throughput) instead.
Pure: takes an `Analysis` (cells.py), returns a `Recommendation` and its text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import pandas as pd

from sweeper.analysis import stats
from sweeper.analysis.cells import Analysis, compare_with_baseline
from sweeper.schema import AnalysisConfig, ConstraintsConfig

# constraint -> (cell-table column, unit)
CONSTRAINTS = {"max_gpu_mem_gb": ("gpu_mem_gb", "GB"), "max_host_mem_gb": ("host_mem_gb", "GB"),
               "max_cpus": ("num_cpus", "CPUs")}
PER_ITEM = "s_per_item"


@dataclass
class Recommendation:
    cell_id: Optional[str]
    cell: str
    objective: str                     # "p50", "p95" or "s_per_item"
    value: float                       # the objective's median over repeats (seconds)
    gain: float                        # baseline / cell - 1: 0.25 = 25% faster than the baseline
    gain_low: float
    gain_high: float
    verdict: str
    is_baseline: bool
    applied: List[str] = field(default_factory=list)
    ignored: List[str] = field(default_factory=list)
    excluded: List[str] = field(default_factory=list)
    runner_up: str = ""                # the best point estimate, when it was not chosen


def _objective(analysis: Analysis) -> str:
    """The metric, unless items per step differ between cells (then time per item)."""
    r = analysis.repeats
    per_step = (r["items_per_s"] * r["mean"]).round(6)
    per_cell = per_step.groupby(r["cell_id"]).median().dropna()
    return PER_ITEM if per_cell.nunique() > 1 else analysis.metric


def _allowed(cells: pd.DataFrame, constraints: ConstraintsConfig):
    """(mask of cells within the limits, applied, ignored) for the constraints that are set."""
    mask = pd.Series(True, index=cells.index)
    applied, ignored = [], []
    for name, (column, unit) in CONSTRAINTS.items():
        limit = getattr(constraints, name)
        if limit is None:
            continue
        if column not in cells.columns or cells[column].isna().all():
            ignored.append(f"{name}={limit:g}: the trials recorded no {column}; constraint ignored")
            continue
        mask &= cells[column].astype(float) <= limit   # NaN (not recorded) fails the limit
        applied.append(f"{name}={limit:g} {unit}")
    return mask, applied, ignored


def _comparisons(analysis: Analysis, objective: str, cfg: AnalysisConfig) -> pd.DataFrame:
    """ratio, low, high, verdict per cell for the objective (cell / baseline, lower is better)."""
    if objective != PER_ITEM:
        v = analysis.verdicts.set_index("cell_id")
        return v[[f"{objective}_ratio", f"{objective}_low", f"{objective}_high", f"{objective}_verdict"]] \
            .set_axis(["ratio", "low", "high", "verdict"], axis=1)
    repeats = analysis.repeats.assign(**{PER_ITEM: 1.0 / analysis.repeats["items_per_s"]})
    found = compare_with_baseline(repeats, list(analysis.cells["cell_id"]), analysis.baseline_id, cfg, PER_ITEM)
    rows = {c: (x.ratio, x.ratio_low, x.ratio_high, x.verdict) for c, x in found.items()}
    rows[analysis.baseline_id] = (1.0, math.nan, math.nan, "baseline")
    return pd.DataFrame.from_dict(rows, orient="index", columns=["ratio", "low", "high", "verdict"])


def recommend(analysis: Analysis, cfg: Optional[AnalysisConfig] = None) -> Optional[Recommendation]:
    """The configuration to use, or None when no cell finished or there is no baseline."""
    cfg = cfg or AnalysisConfig()
    cells = analysis.cells
    if cells.empty or analysis.baseline_id is None:
        return None
    objective = _objective(analysis)
    mask, applied, ignored = _allowed(cells, cfg.constraints)
    comparisons = _comparisons(analysis, objective, cfg)
    table = cells.set_index("cell_id").join(comparisons)
    candidates = table[mask.to_numpy() & (table["repeats"] > 0).to_numpy()]
    excluded = [str(c) for c in table.loc[~mask.to_numpy(), "cell"]]
    if candidates.empty:
        return Recommendation(None, "", objective, math.nan, math.nan, math.nan, math.nan, "",
                              False, applied, ignored, excluded)
    faster = candidates[candidates["verdict"] == stats.FASTER].sort_values("ratio")
    best_guess = candidates.sort_values("ratio").index[0]
    if len(faster):
        chosen = faster.index[0]
    elif analysis.baseline_id in candidates.index:
        chosen = analysis.baseline_id
    else:
        chosen = best_guess
    rec = _build(table, chosen, objective, analysis, applied, ignored, excluded)
    if best_guess != chosen:
        rec.runner_up = _runner_up(table.loc[best_guess])
    return rec


def _median_value(analysis: Analysis, cell_id: str, objective: str) -> float:
    r = analysis.repeats[analysis.repeats["cell_id"] == cell_id]
    values = 1.0 / r["items_per_s"] if objective == PER_ITEM else r[objective]
    values = values.to_numpy(dtype=float)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else math.nan


def _gain(ratio: float) -> float:
    return 1.0 / ratio - 1.0 if ratio and math.isfinite(ratio) else math.nan


def _build(table, chosen, objective, analysis, applied, ignored, excluded) -> Recommendation:
    row = table.loc[chosen]
    return Recommendation(
        cell_id=str(chosen), cell=str(row["cell"]), objective=objective,
        value=_median_value(analysis, chosen, objective),
        gain=_gain(row["ratio"]), gain_low=_gain(row["high"]), gain_high=_gain(row["low"]),
        verdict=str(row["verdict"]), is_baseline=chosen == analysis.baseline_id,
        applied=applied, ignored=ignored, excluded=excluded)


def _runner_up(row: pd.Series) -> str:
    return (f"best point estimate: {row['cell']} ({_pct(_gain(row['ratio']))}, "
            f"interval {_interval(_gain(row['high']), _gain(row['low']))}; {row['verdict']})")


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f}%"


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "[-]"
    return f"[{_pct(low)}, {_pct(high)}]"


_OBJECTIVE_WORDS = {"p50": "median step time", "p95": "p95 step time", PER_ITEM: "time per item (1 / throughput)"}


def format_recommendation(rec: Optional[Recommendation]) -> List[str]:
    """The recommendation as text lines, for the terminal, report.md and report.html."""
    if rec is None:
        return ["no recommendation: no cell finished, or there is no baseline"]
    lines = [f"constraints: {', '.join(rec.applied) or 'none'}"] + [f"note: {i}" for i in rec.ignored]
    if rec.excluded:
        lines.append(f"excluded by the constraints: {'; '.join(rec.excluded)}")
    if rec.cell_id is None:
        return lines + ["no cell satisfies the constraints"]
    judged = f"judged on {_OBJECTIVE_WORDS[rec.objective]}"
    if rec.is_baseline:
        lines.append(f"recommended: keep the baseline {rec.cell}: no configuration is detectably faster ({judged})")
    else:
        lines.append(f"recommended: {rec.cell}: {_pct(rec.gain)} faster than the baseline, interval "
                     f"{_interval(rec.gain_low, rec.gain_high)} ({rec.verdict}; {judged})")
    if rec.runner_up:
        lines.append(rec.runner_up)
    return lines
