"""The best configuration of a run, under optional resource constraints.

Picks among cells that finished and respect the constraints (analysis.constraints):
the one detectably faster than the baseline with the largest gain; when none is,
the baseline itself, naming the best point estimate and why it was not chosen.
A constraint whose figure the run did not record is ignored, and said so.

"Faster" is judged on `analysis.metric`: throughput by default (each repeat's items /
its time; larger is better, gain = cell / baseline - 1). On p50 or p95 step time
(smaller is better, gain = baseline / cell - 1), when the items per step differ
between cells (batch size swept) step times are not comparable, so cells are ranked
by time per item (1 / throughput) instead.
Pure: takes a one-stratum `Analysis` (model.py; run.py asks once per stratum), returns a
`Recommendation`; `recommendation_lines` words every stratum's for the views.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import List, Optional

import pandas as pd

from sweeper.analysis import overlap, stats
from sweeper.analysis.model import COLUMN, HIGHER_IS_BETTER
from sweeper.analysis.text import num, pct
from sweeper.schema import AnalysisConfig

# constraint -> (cell-table column, unit)
CONSTRAINTS = {"max_gpu_mem_gb": ("gpu_mem_gb", "GB"), "max_host_mem_gb": ("host_mem_gb", "GB"),
               "max_cpus": ("num_cpus", "CPUs")}
PER_ITEM = "s_per_item"
FASTEST = "fastest"


@dataclass
class Recommendation:
    cell_id: Optional[str]
    cell: str
    objective: str                     # "throughput", "p50", "p95" or "s_per_item"
    value: float                       # the objective's median over the cell's repeats
    gain: float                        # 0.25 = 25% faster than the baseline (throughput x 1.25, or time / 1.25)
    gain_low: float
    gain_high: float
    verdict: str
    is_baseline: bool
    applied: List[str] = field(default_factory=list)
    ignored: List[str] = field(default_factory=list)
    excluded: List[str] = field(default_factory=list)
    runner_up: str = ""                # the best point estimate, when it was not chosen
    baseline_value: float = math.nan   # the objective's median over the baseline's repeats
    items_label: str = "items"
    loader: str = ""                   # the overlap projection of the chosen cell (overlap.loader_words)
    cost_unit: str = ""                # objective "cost": tokens or samples (per million)
    throughput_verdict: str = ""       # objective "cost": the chosen cell's throughput verdict
    tied: List[str] = field(default_factory=list)   # objective "fastest": the cells tied with the fastest
    baseline_failed: bool = False      # the baseline (`cell`) has no successful repeat: nothing to compare with


def _objective(analysis) -> str:
    """The metric; on step times, time per item instead when items per step differ between cells."""
    if analysis.metric in HIGHER_IS_BETTER:
        return analysis.metric
    r = analysis.repeats
    per_step = (r["items_per_s"] * r["mean"]).round(6)
    per_cell = per_step.groupby(r["cell_id"]).median().dropna()
    return PER_ITEM if per_cell.nunique() > 1 else analysis.metric


def _limits(cfg: AnalysisConfig, memory_column: str):
    """(name, limit, cell column, unit) of every constraint, analysis.max_memory_gb on the workload's memory."""
    out = [(name, getattr(cfg.constraints, name), column, unit) for name, (column, unit) in CONSTRAINTS.items()]
    return out + [("max_memory_gb", cfg.max_memory_gb, memory_column, "GB")]


def _allowed(cells: pd.DataFrame, cfg: AnalysisConfig, memory_column: str = "host_mem_gb"):
    """(mask of cells within the limits, applied, ignored) for the constraints that are set."""
    mask = pd.Series(True, index=cells.index)
    applied, ignored = [], []
    for name, limit, column, unit in _limits(cfg, memory_column):
        if limit is None:
            continue
        if column not in cells.columns or cells[column].isna().all():
            ignored.append(f"{name}={limit:g}: the trials recorded no {column}; constraint ignored")
            continue
        mask &= cells[column].astype(float) <= limit   # NaN (not recorded) fails the limit
        applied.append(f"{name}={limit:g} {unit}")
    return mask, applied, ignored


def _comparisons(analysis, objective: str) -> pd.DataFrame:
    """ratio, low, high (cell / baseline) and verdict per cell for the objective, from the verdicts.
    Time per item is 1 / items/s of the same repeats: throughput's comparison turned over (the
    same test and the same verdict; the ratio and its interval inverted)."""
    metric = "throughput" if objective == PER_ITEM else objective
    v = analysis.verdicts.set_index("cell_id")
    table = v[[f"{metric}_ratio", f"{metric}_ratio_low", f"{metric}_ratio_high", f"{metric}_verdict"]] \
        .set_axis(["ratio", "low", "high", "verdict"], axis=1)
    if objective == PER_ITEM:
        table = table.assign(ratio=1.0 / table["ratio"], low=1.0 / table["high"], high=1.0 / table["low"])
    return table


def _gain(ratio: float, higher_is_better: bool) -> float:
    """How much faster than the baseline: throughput x (1 + gain), or time / (1 + gain)."""
    if not (ratio and math.isfinite(ratio)):
        return math.nan
    return ratio - 1.0 if higher_is_better else 1.0 / ratio - 1.0


def _with_gains(table: pd.DataFrame, higher: bool) -> pd.DataFrame:
    low, high = (table["low"], table["high"]) if higher else (table["high"], table["low"])
    return table.assign(gain=table["ratio"].map(lambda r: _gain(r, higher)),
                        gain_low=low.map(lambda r: _gain(r, higher)),
                        gain_high=high.map(lambda r: _gain(r, higher)))


def recommend(analysis, cfg: Optional[AnalysisConfig] = None) -> Optional[Recommendation]:
    """The configuration to use, or None when no cell finished or there is no baseline."""
    cfg = cfg or analysis.config
    cells = analysis.cells
    if cells.empty or analysis.baseline_id is None or analysis.verdicts.empty:
        return None
    unjudged = _baseline_without_result(analysis)
    if unjudged is not None:
        return unjudged
    if cfg.objective == "cost":
        return _with_loader(recommend_cost(analysis, cfg), analysis)
    if cfg.objective == FASTEST:
        return _with_loader(recommend_fastest(analysis, cfg), analysis)
    objective = _objective(analysis)
    mask, applied, ignored = _allowed(cells, cfg, analysis.workload.memory)
    table = _with_gains(cells.set_index("cell_id").join(_comparisons(analysis, objective)),
                        objective in HIGHER_IS_BETTER)
    candidates = table[mask.to_numpy() & (table["repeats"] > 0).to_numpy()]
    excluded = [str(c) for c in table.loc[~mask.to_numpy(), "cell"]]
    label = analysis.workload.items_label
    if candidates.empty:
        return Recommendation(None, "", objective, math.nan, math.nan, math.nan, math.nan, "",
                              False, applied, ignored, excluded, items_label=label)
    ranked = candidates.sort_values("gain", ascending=False, na_position="last", kind="stable")
    faster = ranked[ranked["verdict"] == stats.FASTER]
    best_guess = ranked.index[0]
    if len(faster):
        chosen = faster.index[0]
    elif analysis.baseline_id in candidates.index:
        chosen = analysis.baseline_id
    else:
        chosen = best_guess
    row = table.loc[chosen]
    rec = Recommendation(
        cell_id=str(chosen), cell=str(row["cell"]), objective=objective,
        value=_median_value(analysis, chosen, objective), gain=row["gain"], gain_low=row["gain_low"],
        gain_high=row["gain_high"], verdict=str(row["verdict"]), is_baseline=chosen == analysis.baseline_id,
        applied=applied, ignored=ignored, excluded=excluded,
        baseline_value=_median_value(analysis, analysis.baseline_id, objective), items_label=label)
    if best_guess != chosen:
        rec.runner_up = _runner_up(table.loc[best_guess])
    return _with_loader(rec, analysis)


def _baseline_without_result(analysis) -> Optional[Recommendation]:
    """The recommendation of a run whose baseline has no successful repeat (every one failed):
    none, for any objective, since every gain and verdict is relative to the baseline."""
    if not (analysis.verdicts["verdict"] == stats.NO_BASELINE).any():     # the verdicts' call, not a second rule
        return None
    base = analysis.cells.loc[analysis.cells["cell_id"] == analysis.baseline_id]
    label = str(base["cell"].iloc[0]) if len(base) else str(analysis.baseline_id)
    return Recommendation(cell_id=None, cell=label, objective=analysis.metric, value=math.nan, gain=math.nan,
                          gain_low=math.nan, gain_high=math.nan, verdict="", is_baseline=False,
                          items_label=analysis.workload.items_label, baseline_failed=True)


def recommendation_lines(analysis) -> List[str]:
    """What every view prints as the recommendation: each judged stratum's `format_recommendation`,
    its lines prefixed with the stratum's label when the run is split (the constraints once)."""
    head, lines = [], []
    for stratum in analysis.judged_strata():
        prefix = f"{stratum.label}: " if stratum.label else ""
        body = format_recommendation(stratum.recommendation)
        head += [line for line in body if line.startswith(("constraints:", "note:"))]
        lines += [f"{prefix}{line}" for line in body if not line.startswith(("constraints:", "note:"))]
    return list(dict.fromkeys(head)) + lines


def _with_loader(rec: Optional[Recommendation], analysis) -> Optional[Recommendation]:
    """The chosen cell's overlap projection, in words (sweeper/analysis/overlap.py)."""
    if rec is not None and rec.cell_id is not None:
        row = analysis.cells.set_index("cell_id").loc[rec.cell_id]
        rec.loader = overlap.loader_words(row.to_dict(), analysis.config.min_effect) or ""
    return rec


def recommend_cost(analysis, cfg: AnalysisConfig) -> Recommendation:
    """analysis.objective=cost: the cell with the fewest dollars per million tokens (or samples)
    among those within the constraints; gain = baseline cost / its cost - 1 (0.25: 25% cheaper
    per unit, i.e. the baseline costs 1.25x). Its throughput verdict says whether the
    difference in speed behind it is detectable."""
    cells, column, label = analysis.cells, analysis.cost_column, analysis.workload.items_label
    mask, applied, ignored = _allowed(cells, cfg, analysis.workload.memory)
    empty = Recommendation(None, "", "cost", math.nan, math.nan, math.nan, math.nan, "", False, applied,
                           ignored, [str(c) for c in cells.loc[~mask, "cell"]], items_label=label)
    if column is None:
        empty.ignored.append("analysis.objective=cost: no cell has a cost (see the cost notes)")
        return empty
    priced = cells[mask & (cells["repeats"] > 0) & cells[column].notna()]
    if priced.empty:
        return empty
    best = priced.sort_values(column, kind="stable").iloc[0]
    base = cells.loc[cells["cell_id"] == analysis.baseline_id, column]
    base_cost = float(base.iloc[0]) if len(base) else math.nan
    verdicts = analysis.verdicts.set_index("cell_id")
    return dataclasses.replace(
        empty, cell_id=str(best["cell_id"]), cell=str(best["cell"]), value=float(best[column]),
        gain=base_cost / float(best[column]) - 1.0, verdict="cheapest",
        is_baseline=best["cell_id"] == analysis.baseline_id, baseline_value=base_cost,
        cost_unit=column.rsplit("_", 1)[-1],
        throughput_verdict=str(verdicts.loc[best["cell_id"], "throughput_verdict"]) if best["cell_id"] in verdicts.index else "")


def recommend_fastest(analysis, cfg: AnalysisConfig) -> Recommendation:
    """analysis.objective=fastest: the cell with the best mean (of logs) on analysis.metric among
    those the race kept and the constraints allow, and every cell tied with it (not clearly
    behind it, or within min_effect): sequential.fastest, the rule the race stops cells by."""
    from sweeper.analysis import sequential

    mask, applied, ignored = _allowed(analysis.cells, cfg, analysis.workload.memory)
    empty = Recommendation(None, "", analysis.metric, math.nan, math.nan, math.nan, math.nan, "", False, applied,
                           ignored, [str(c) for c in analysis.cells.loc[~mask, "cell"]],
                           items_label=analysis.workload.items_label)
    allowed = set(analysis.cells.loc[mask, "cell_id"])
    column = COLUMN[analysis.metric]
    values = {c: dict(enumerate(g[column].dropna())) for c, g in analysis.repeats.groupby("cell_id") if c in allowed}
    if analysis.baseline_id not in values:
        return empty
    design = analysis.design or sequential.Design(cfg.alpha, cfg.min_effect,
                                                  higher_is_better=analysis.metric in HIGHER_IS_BETTER)
    found = sequential.fastest(values, analysis.baseline_id, _dropped(analysis), design)
    if found is None:
        return empty
    labels = dict(zip(analysis.cells["cell_id"], analysis.cells["cell"]))
    verdicts = analysis.verdicts.set_index("cell_id")
    higher = analysis.metric in HIGHER_IS_BETTER
    low, high = (found.low, found.high) if higher else (found.high, found.low)
    return dataclasses.replace(
        empty, cell_id=found.cell_id, cell=str(labels[found.cell_id]), value=_median_value(analysis, found.cell_id,
                                                                                           analysis.metric),
        gain=_gain(found.ratio, higher), gain_low=_gain(low, higher), gain_high=_gain(high, higher),
        verdict=str(verdicts.loc[found.cell_id, "verdict"]), is_baseline=found.cell_id == analysis.baseline_id,
        baseline_value=_median_value(analysis, analysis.baseline_id, analysis.metric), objective=FASTEST,
        tied=[str(labels[c]) for c in found.tied])


def _dropped(analysis) -> dict:
    """The cells the race stopped (the verdicts' `stopped` column), as decisions fastest() reads."""
    from sweeper.analysis import sequential
    from sweeper.analysis.model import STOPPED

    if STOPPED not in analysis.verdicts.columns:
        return {}
    gone = analysis.verdicts.loc[analysis.verdicts[STOPPED] == sequential.DROPPED, "cell_id"]
    return {c: sequential.Decision(c, reason=sequential.DROPPED) for c in gone}


def _median_value(analysis, cell_id: str, objective: str) -> float:
    """The cell table's median (cells.py); time per item: 1 / its throughput, as its gain is
    throughput's turned over (`_comparisons`)."""
    found = analysis.cells.loc[analysis.cells["cell_id"] == cell_id, COLUMN["throughput" if objective == PER_ITEM
                                                                             else objective]]
    value = float(found.iloc[0]) if len(found) else math.nan
    return 1.0 / value if objective == PER_ITEM and value else value


def _runner_up(row: pd.Series) -> str:
    return (f"best point estimate: {row['cell']} ({pct(row['gain'])}, "
            f"interval {_interval(row['gain_low'], row['gain_high'])}; {row['verdict']})")


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "[-]"
    return f"[{pct(low)}, {pct(high)}]"


def _words(rec: Recommendation) -> str:
    return {"throughput": f"throughput, {rec.items_label} per second of each repeat",
            "p50": "median step time", "p95": "p95 step time",
            PER_ITEM: "time per item (1 / throughput)"}[rec.objective]


def _figures(rec: Recommendation) -> str:
    """"14,426 vs 12,880 samples/s" or "1.82 vs 1.97 ms": the cell's figure and the baseline's."""
    if rec.objective == "throughput":
        return f"{num(rec.value, 1.0, 0)} vs {num(rec.baseline_value, 1.0, 0)} {rec.items_label}/s"
    if rec.objective == PER_ITEM:
        return f"{num(rec.value, 1e6, 1)} vs {num(rec.baseline_value, 1e6, 1)} us per item"
    return f"{num(rec.value, 1e3)} vs {num(rec.baseline_value, 1e3)} ms"


def format_recommendation(rec: Optional[Recommendation]) -> List[str]:
    """The recommendation as text lines, for the terminal, report.md, report.html and W&B."""
    if rec is None:
        return ["no recommendation: no cell finished, or there is no baseline"]
    if rec.baseline_failed:
        return [f"no recommendation: the baseline {rec.cell} has no successful repeat, so no cell can be compared "
                "with it; see why its trials failed (their trial.json), then run the sweep again"]
    lines = [f"constraints: {', '.join(rec.applied) or 'none'}"] + [f"note: {i}" for i in rec.ignored]
    if rec.excluded:
        lines.append(f"excluded by the constraints: {'; '.join(rec.excluded)}")
    if rec.cell_id is None:
        return lines + ["no cell satisfies the constraints"]
    if rec.objective == "cost":
        return lines + _cost_lines(rec)
    if rec.objective == FASTEST:
        return lines + _fastest_lines(rec)
    judged = f"judged on {_words(rec)}"
    if rec.is_baseline:
        lines.append(f"recommended: keep the baseline {rec.cell}: no configuration is detectably faster ({judged})")
    else:
        lines.append(f"recommended: {rec.cell}: {pct(rec.gain)} faster than the baseline ({_figures(rec)}), "
                     f"interval {_interval(rec.gain_low, rec.gain_high)} ({rec.verdict}; {judged})")
    if rec.runner_up:
        lines.append(rec.runner_up)
    return lines + ([rec.loader] if rec.loader else [])


def _fastest_lines(rec: Recommendation) -> List[str]:
    """analysis.objective=fastest: the fastest setting, its gain on the baseline, the settings tied with it."""
    which = f"the baseline {rec.cell}" if rec.is_baseline else rec.cell
    gain = "" if rec.is_baseline else (f": {pct(rec.gain)} faster than the baseline, interval "
                                       f"{_interval(rec.gain_low, rec.gain_high)} ({rec.verdict})")
    tied = f"tied with it (not clearly slower, or within the minimum effect): {', '.join(rec.tied)}" if rec.tied \
        else "no other setting is tied with it"
    return [f"recommended (analysis.objective=fastest): {which}{gain}", tied] + ([rec.loader] if rec.loader else [])


def _cost_lines(rec: Recommendation) -> List[str]:
    which = "the baseline" if rec.is_baseline else rec.cell
    cheaper = "" if rec.is_baseline else f", {pct(rec.gain)} more {rec.cost_unit} per dollar than the baseline"
    lines = [f"recommended (analysis.objective=cost): {which}: ${num(rec.value, 1.0, 4)} per million "
             f"{rec.cost_unit} vs ${num(rec.baseline_value, 1.0, 4)} for the baseline{cheaper} "
             f"(throughput verdict: {rec.throughput_verdict or '-'})"]
    return lines + ([rec.loader] if rec.loader else [])

