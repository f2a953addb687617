"""Verdicts: each cell against its stratum's baseline, and the noise floor (the baseline A/A).

A cell is compared with the baseline over one value per repeat (stats.compare_cells), Holm-
adjusted across the stratum's cells, and judged faster / slower / within the minimum effect /
no detectable change / too few repeats / no baseline result. A run of repeats=auto is judged by the looks the sweep
took (sequential.py), every metric by the same rule, with why each cell stopped (on analysis.metric). The noise floor is the baseline against itself: its
repeats in run order, split into two interleaved halves. Pure over DataFrames.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import sequential as sequential_rule
from sweeper.analysis import stats
from sweeper.analysis.model import (ALONE, BASELINE, COLUMN, FAILED, HIGHER_IS_BETTER, LEFT_OUT, METRICS, STOPPED,
                                    STRATUM, VERDICT_COLUMNS, Stratum)
from sweeper.analysis.repeats import values
from sweeper.schema import AnalysisConfig

Comparisons = Dict[str, Dict[str, stats.Comparison]]     # metric -> cell_id -> against its baseline


class Stop(NamedTuple):
    """repeats=auto: why a cell got no more repeats, and how many of its slow repeats its last look
    left out (a baseline's: the most any of its cells' last looks left out)."""
    why: str
    left_out: int = 0


def compare_with_baseline(repeats: pd.DataFrame, cells: Sequence[str], baseline_id: str,
                          cfg: AnalysisConfig, metric: str, seed: int = 0,
                          n_resamples: int = 2000) -> Dict[str, stats.Comparison]:
    """Each cell against the baseline over per-repeat values of `metric` (a metric name or a
    repeat-table column), Holm across cells; `n_resamples`: the ratio interval's bootstrap."""
    column, higher = COLUMN.get(metric, metric), metric in HIGHER_IS_BETTER
    base = values(repeats, baseline_id, column)
    others = [c for c in cells if c != baseline_id]
    raw = [stats.compare_cells(base, values(repeats, c, column), cfg.alpha, cfg.min_effect, seed=seed,
                               higher_is_better=higher, n_resamples=n_resamples) for c in others]
    adjusted = stats.apply_holm(raw)
    return dict(zip(others, [_family_too_few(c, len(others)) for c in adjusted]))


def _family_too_few(c: stats.Comparison, family: int) -> stats.Comparison:
    """Holm multiplies the smallest p by the family size, so when even the smallest p these
    repeat counts allow cannot pass, "no detectable change" would be a false comfort."""
    if c.verdict == stats.NO_CHANGE and stats.min_achievable_p(max(c.n_a, 1), max(c.n_b, 1)) * family >= c.alpha:
        return dataclasses.replace(c, verdict=stats.TOO_FEW)
    return c


def noise_floor(repeats: pd.DataFrame, baseline_id: str, cfg: AnalysisConfig, metric: str,
                seed: int = 0, design: Optional[sequential_rule.Design] = None) -> Optional[stats.Comparison]:
    """The baseline against itself: its repeats in run order, split into two interleaved halves.
    A repeats=auto run (`design`) judges them with its own test, as one final look (`_one_look`),
    where each half has two finite values and they have a spread to test."""
    base = repeats[repeats["cell_id"] == baseline_id]
    order = ["started_at", "repeat"] if base["started_at"].notna().all() else ["repeat"]
    ordered = base.sort_values(order)[COLUMN[metric]].to_numpy(dtype=float)
    if ordered.size < 2:
        return None
    first, second = ordered[0::2], ordered[1::2]
    if design is not None and min(np.isfinite(first).sum(), np.isfinite(second).sum()) >= 2:
        looked = _one_look(first, second, design)
        if math.isfinite(looked.p_value):        # else no spread to test (identical values): the rank test says so
            return looked
    return stats.compare_cells(first, second, cfg.alpha, cfg.min_effect, seed=seed,
                               higher_is_better=metric in HIGHER_IS_BETTER)


def _one_look(first: np.ndarray, second: np.ndarray, design: sequential_rule.Design) -> stats.Comparison:
    """`second` against `first` by repeats=auto's rule at a single look that spends all of alpha
    (its information fraction 1): the t-test on logs, its interval and verdict."""
    values = {"first": dict(enumerate(first)), "second": dict(enumerate(second))}
    once = dataclasses.replace(design, first=second.size, max_repeats=second.size, race=False)
    decided = sequential_rule.replay(values, {"second": second.size}, "first", once).decisions["second"]
    return _as_comparison(decided, once)


def judge(strata: Sequence[Stratum], repeats: pd.DataFrame, cfg: AnalysisConfig, seed: int = 0,
          sequential: Any = None, trial_repeats: Optional[Dict[str, List[int]]] = None):
    """Each stratum with its noise floor, and every cell's comparisons with its stratum's baseline
    (Holm within the stratum): (strata, comparisons per metric, each cell's Stop). A run of
    repeats=auto (`sequential`: its SequentialConfig) is judged by the looks the sweep took
    (sequential.replay), every metric by the same rule over the repeats each cell ran: the cells
    stopped on analysis.metric, so another metric's verdict is what its own looks decided by then
    (or undecided); `trial_repeats`: cell -> its trials' repeat numbers."""
    comparisons: Comparisons = {m: {} for m in METRICS}
    judged, stopped = [], {}
    design = sequential_design(strata, cfg, sequential)
    for s in strata:
        if s.baseline_id is not None:
            schedule = None       # the chosen metric's looks set the baseline's repeats at each round
            for m in sorted(METRICS, key=lambda m: m != cfg.metric):
                if design is None:
                    comparisons[m].update(compare_with_baseline(repeats, list(s.cell_ids), s.baseline_id, cfg, m, seed))
                    continue
                found, at = _looked(repeats, s, _for_metric(design, m, cfg.metric), m, trial_repeats or {}, schedule)
                comparisons[m].update({c: x for c, (x, _) in found.items()})
                if m == cfg.metric:
                    schedule = at
                    stopped.update({c: Stop(d.reason, d.left_out) for c, (_, d) in found.items()})
                    stopped[s.baseline_id] = Stop("", max([d.base_left_out for _, d in found.values()] + [0]))
            for m in METRICS:
                comparisons[m].update(_without_baseline(comparisons[m], s, repeats, m))
            s = dataclasses.replace(s, noise_floor=noise_floor(repeats, s.baseline_id, cfg, cfg.metric, seed, design))
        judged.append(s)
    return tuple(judged), comparisons, stopped


def _without_baseline(found: Dict[str, stats.Comparison], s: Stratum, repeats: pd.DataFrame,
                      metric: str) -> Dict[str, stats.Comparison]:
    """The stratum's cells judged against a baseline with no value of `metric` (every repeat of it
    failed): NO_BASELINE, the one place that says so (the notes and the recommendation read it),
    rather than 'too few repeats', which would send the user to add repeats."""
    if np.isfinite(values(repeats, s.baseline_id, COLUMN[metric])).any():
        return {}
    return {c: dataclasses.replace(x, verdict=stats.NO_BASELINE) for c, x in found.items() if c in s.cell_ids}


def sequential_design(strata: Sequence[Stratum], cfg: AnalysisConfig,
                      sequential: Any) -> Optional[sequential_rule.Design]:
    """A repeats=auto run's Design (its first round computed for its largest stratum); None otherwise."""
    if sequential is None:
        return None
    family = max([len(s.cell_ids) - 1 for s in strata if s.baseline_id is not None] + [1])
    return sequential_rule.design_for(cfg, sequential, family)


def _for_metric(design: sequential_rule.Design, metric: str, chosen: str) -> sequential_rule.Design:
    """The run's Design for judging `metric`: its own direction; only the chosen metric races."""
    if metric == chosen:
        return design
    return dataclasses.replace(design, higher_is_better=metric in HIGHER_IS_BETTER, race=False)


def _looked(repeats: pd.DataFrame, s: Stratum, design: sequential_rule.Design, metric: str,
            trial_repeats: Dict[str, List[int]], schedule: Optional[Dict[int, int]] = None) -> tuple:
    """(cell -> (its Comparison on `metric` from the sequential decision, the decision), the
    baseline's repeats at each round's look); `schedule`: those of the chosen metric's replay."""
    column = COLUMN[metric]
    mine = repeats[repeats["cell_id"].isin(s.cell_ids)]
    values = {c: {} for c in s.cell_ids}
    for row in mine[["cell_id", "repeat", column]].to_dict("records"):
        values[row["cell_id"]][int(row["repeat"])] = float(row[column])
    rounds = {c: sequential_rule.rounds_of(trial_repeats.get(c, [])) for c in s.cell_ids if c != s.baseline_id}
    failed = [c for c in rounds if sequential_rule.last_failed(values[c], trial_repeats.get(c, []))]
    replayed = sequential_rule.replay(values, rounds, s.baseline_id, design, schedule)
    decided = sequential_rule.closed(replayed.decisions, failed)
    return {c: (_as_comparison(d, design), d) for c, d in decided.items()}, \
        replayed.base_at


def _as_comparison(d: sequential_rule.Decision, design: sequential_rule.Design) -> stats.Comparison:
    """A sequential decision in the shape of a Comparison; its adjusted p is the look's p on
    alpha's scale (p x alpha / the look's level: under alpha exactly when the look decided)."""
    scaled = min(1.0, d.p * design.alpha / d.level) if d.level > 0 and math.isfinite(d.p) else math.nan
    return stats.Comparison(d.n_base, d.n, d.p, d.ratio, d.low, d.high, d.delta, d.verdict, design.alpha,
                            design.min_effect, scaled, design.higher_is_better)


def verdict_table(cells: pd.DataFrame, comparisons: Comparisons, strata: Sequence[Stratum],
                  metric: str, stopped: Optional[Dict[str, Stop]] = None) -> pd.DataFrame:
    """One row per cell: its figures, then ratio [CI], p, adjusted p, Cliff's delta and verdict
    per metric (`throughput_ratio`, `p50_ratio_low`, ...: VERDICT_COLUMNS); `verdict` is the
    chosen metric's. Stratum by stratum in order of appearance, each with its baseline first,
    then best first by the chosen metric, cells with no finished repeat last; a cell alone in
    its stratum reads ALONE."""
    if cells.empty:
        return pd.DataFrame()
    bases = {s.baseline_id for s in strata if s.baseline_id is not None}
    alone = {c for s in strata if s.alone for c in s.cell_ids}
    split = STRATUM in cells.columns
    rows = []
    for cell in cells.to_dict("records"):
        row = {k: cell.get(k) for k in ("cell", "cell_id", *((STRATUM,) if split else ()), "repeats", "failed",
                                        "items_per_s", "p50", "p95")}
        for m in METRICS:
            row.update(_comparison_columns(m, comparisons.get(m, {}).get(cell["cell_id"]),
                                           cell["cell_id"] in bases, cell["repeats"], cell["cell_id"] in alone))
        row["verdict"] = row[f"{metric}_verdict"]
        if stopped is not None:      # repeats=auto: why the cell got no more repeats, its slow repeats left out
            row[STOPPED], row[LEFT_OUT] = stopped.get(cell["cell_id"], Stop(""))
        rows.append(row)
    table = pd.DataFrame(rows)
    order = {c: i for i, s in enumerate(strata) for c in s.cell_ids}
    rank = table["cell_id"].map(order) * 10 + table["cell_id"].map(lambda c: 0 if c in bases else 1) \
        + (table["repeats"] == 0) * 2
    worse_first = table[f"{metric}_ratio"] * (-1 if metric in HIGHER_IS_BETTER else 1)
    return (table.assign(_rank=rank, _key=worse_first.fillna(np.inf))
            .sort_values(["_rank", "_key", "cell"], kind="stable").drop(columns=["_rank", "_key"])
            .reset_index(drop=True))


def _comparison_columns(metric: str, c: Optional[stats.Comparison], is_baseline: bool,
                        repeats: int, alone: bool = False) -> Dict[str, Any]:
    if alone:
        row = (math.nan,) * 6 + (ALONE,)
    elif is_baseline:
        row = (1.0, math.nan, math.nan, math.nan, math.nan, math.nan, BASELINE)
    elif c is None or repeats == 0:
        row = (math.nan,) * 6 + (FAILED if repeats == 0 else "",)
    else:   # delta > 0: the cell tends to be faster than the baseline, whichever the metric
        delta = -c.cliffs_delta if c.higher_is_better else c.cliffs_delta
        row = (c.ratio, c.ratio_low, c.ratio_high, c.p_value, c.p_adjusted, delta, c.verdict)
    return {f"{metric}_{n}": v for n, v in zip(VERDICT_COLUMNS, row)}
