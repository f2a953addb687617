"""The analysis' tables as rows of text cells, shared by every view that prints them:
the terminal (sweeper.display), report.md and report.html.

Pure formatting over an `Analysis`: a table is (header, rows), every cell already a
string, so all views print the same numbers and the golden tests compare text.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from sweeper.analysis import stats
from sweeper.analysis.model import HIGHER_IS_BETTER, LEFT_OUT, METRICS, STOPPED, STRATUM, Analysis
from sweeper.analysis.pairs import pair_lines
from sweeper.analysis.repeats import measured_steps
from sweeper.analysis.text import interval, num, pvalue, rate_digits

Table = Tuple[List[str], List[List[str]]]
Figure = Tuple[str, str, float, Optional[int]]    # cell column, header, scale, digits (None: a rate's own)

METRIC_WORDS = {"throughput": "throughput ({label}/s of each repeat: its items / its time over its measured "
                              "steps; larger is faster)",
                "p50": "p50 step time of each repeat (a latency figure; smaller is faster)",
                "p95": "p95 step time of each repeat (a latency figure; smaller is faster)"}


# --------------------------------------------------------------------------- one cell's figures


def figures(analysis: Analysis, headline: bool = True) -> List[Figure]:
    """The figures per-cell tables show: items/s, p50 ms, p95 ms, then the workload's headline,
    then what the analysis adds (cost per million, scaling efficiency)."""
    label = analysis.workload.items_label
    out: List[Figure] = [("items_per_s", f"{label}/s", 1.0, None), ("p50", "p50 ms", 1e3, 2),
                         ("p95", "p95 ms", 1e3, 2)]
    return out + (list(analysis.workload.headline) + list(analysis.extra) if headline else [])


def figure(row: Dict[str, Any], column: str, scale: float = 1.0, digits: Optional[int] = None,
           with_interval: bool = False) -> str:
    """One cell's figure as every view prints it, optionally with its 95% interval."""
    digits = rate_digits(row.get(column)) if digits is None else digits
    text = num(row.get(column), scale, digits)
    ci = interval(row.get(f"{column}_low"), row.get(f"{column}_high"), scale, digits) if with_interval else "-"
    return text if ci == "-" else f"{text} {ci}"


def cell_rows(analysis: Analysis) -> Dict[str, Dict[str, Any]]:
    return {row["cell_id"]: row for row in analysis.cells.to_dict("records")}


def best_first(analysis: Analysis) -> List[Dict[str, Any]]:
    """Cells best first by the analysis metric; cells with no finished repeat last."""
    cells = analysis.cells
    if cells.empty:
        return []
    column = "items_per_s" if analysis.metric in HIGHER_IS_BETTER else analysis.metric
    key = cells[column] * (-1 if analysis.metric in HIGHER_IS_BETTER else 1)
    order = {c: i for i, s in enumerate(analysis.strata) for c in s.cell_ids}
    group = cells["cell_id"].map(order).fillna(0)       # stratum by stratum, in order of appearance
    ranked = cells.assign(_group=group, _none=cells["repeats"] == 0, _key=key.fillna(float("inf")))
    return ranked.sort_values(["_group", "_none", "_key", "cell"], kind="stable") \
        .drop(columns=["_group", "_none", "_key"]).to_dict("records")


def stratum_header(analysis: Analysis) -> List[str]:
    """["stratum"] when the run is compared within strata, else nothing (one stratum: no column)."""
    return [STRATUM] if analysis.strata_keys else []


def verdicts_title(analysis: Analysis) -> str:
    """The verdict table's title: against the baseline, or each stratum's own."""
    if not analysis.strata_keys:
        return "Verdicts against the baseline"
    within = ", ".join(analysis.names.get(k, k) for k in analysis.strata_keys)
    return f"Verdicts against each stratum's baseline (compared within {within})"


def _order(analysis: Analysis) -> List[str]:
    """Cell ids in verdict-table order: baseline first, then best first."""
    if analysis.verdicts.empty:
        return list(analysis.cells["cell_id"])
    return list(analysis.verdicts["cell_id"])


# --------------------------------------------------------------------------- tables


def cell_statistics(analysis: Analysis) -> Table:
    memory = [(c, h) for c, h in (("gpu_mem_gb", "peak GPU mem GB"), ("host_mem_gb", "peak host mem GB"))
              if c in analysis.cells.columns and analysis.cells[c].notna().any()]
    main = figures(analysis, headline=False)
    added = list(analysis.workload.headline) + list(analysis.extra)
    header = ["cell", "repeats", "failed", *(f[1] for f in main), "mean ms", "std ms", "CV",
              *(h[1] for h in added), *(h for _, h in memory), "CI over"]
    rows = []
    cells = cell_rows(analysis)
    for cell_id in _order(analysis):
        row = cells[cell_id]
        mark = " (baseline)" if analysis.is_baseline(cell_id) else ""
        rows.append([f"{row['cell']}{mark}", str(row["repeats"]), str(row["failed"]),
                     *(figure(row, c, s, d, with_interval=True) for c, _, s, d in main),
                     figure(row, "mean", 1e3, 2, True), figure(row, "std", 1e3, 2),
                     figure(row, "cv", 1.0, 3, True),
                     *(figure(row, c, s, d) for c, _, s, d in added),
                     *(num(row.get(c), 1.0, 3) for c, _ in memory), str(row.get("ci_over", "-"))])
    return header, rows


def verdicts(analysis: Analysis) -> Table:
    """Per cell: its figures, then the chosen metric's ratio, interval, p, delta and verdict,
    then the other metrics' ratio and verdict (p50 and p95 are latency figures). A cell alone in
    its stratum has no verdict, so no row."""
    m = analysis.metric
    others = [o for o in METRICS if o != m]
    main = figures(analysis, headline=False)
    auto = STOPPED in analysis.verdicts.columns       # repeats=auto: each cell's decision and why it stopped
    header = [*stratum_header(analysis), "cell", "repeats", *(f[1] for f in main), f"{m} ratio",
              "interval" if auto else "95% CI", "p (Holm)", "Cliff's delta", "verdict", *(["stopped"] if auto else []),
              *(h for o in others for h in (f"{o} ratio", f"{o} verdict"))]
    cells = cell_rows(analysis)
    rows = []
    judged = {c for s in analysis.judged_strata() for c in s.cell_ids}
    for v in analysis.verdicts.to_dict("records"):
        if v["cell_id"] not in judged:
            continue
        row = cells[v["cell_id"]]
        rows.append([*(str(row[STRATUM]) for _ in stratum_header(analysis)), row["cell"], str(row["repeats"]), *(figure(row, c, s, d) for c, _, s, d in main),
                     num(v.get(f"{m}_ratio"), 1.0, 3), interval(v.get(f"{m}_ratio_low"), v.get(f"{m}_ratio_high"), 1.0, 3),
                     pvalue(v.get(f"{m}_p_adj")), num(v.get(f"{m}_delta"), 1.0, 2), v[f"{m}_verdict"],
                     *([stopped(v)] if auto else []), *(t for o in others for t in (num(v.get(f"{o}_ratio"), 1.0, 3), v[f"{o}_verdict"]))])
    return header, rows


def stopped(verdict: dict) -> str:
    """Why a cell of repeats=auto stopped, and the slow repeats its last look left out (slow.py)."""
    why, slow = verdict.get(STOPPED) or "", verdict.get(LEFT_OUT)
    if not (isinstance(slow, (int, float)) and slow >= 1):
        return why
    left = f"{int(slow)} slow repeat{'s' if slow >= 2 else ''} left out"
    return f"{why}; {left}" if why else left


def noise_floor(analysis: Analysis) -> str:
    """The baseline against itself, in words: one line per judged stratum ("noise floor, kind=images ...")."""
    lines = []
    for s in analysis.judged_strata():
        where = f", {s.label}" if s.label else ""
        if s.baseline_id is None:
            lines.append(f"noise floor{where}: " + ("no baseline in this stratum, so none" if s.label
                                                     else "no baseline cell, so none"))
        else:
            lines.append(_floor_text(s.noise_floor, analysis.metric, where))
    return "\n".join(lines)


def _floor_text(c: Optional[stats.Comparison], metric: str, where: str = "") -> str:
    if c is None:
        return f"noise floor{where}: the baseline has fewer than 2 repeats, so it cannot be compared with itself"
    return (f"noise floor{where} (baseline A/A, its repeats in run order split into two interleaved halves, "
            f"{c.n_a} vs {c.n_b}): {metric} ratio {num(c.ratio, 1.0, 3)} "
            f"{interval(c.ratio_low, c.ratio_high, 1.0, 3)}, p {pvalue(c.p_value)}: {c.verdict}")


def judged(analysis: Analysis) -> str:
    """What the verdicts judged, in words."""
    cfg = analysis.config
    what = METRIC_WORDS[analysis.metric].format(label=analysis.workload.items_label)
    if analysis.design is not None:
        return sequential_words(analysis.design, what)
    return (f"judged on: {what}; a verdict needs p < {cfg.alpha:g} after Holm and a change of at least "
            f"{cfg.min_effect * 100:g}% (smaller significant changes read \"within {cfg.min_effect * 100:g}%\"); "
            f"ratio = cell / baseline; Cliff's delta > 0: the cell tends to be faster")


def sequential_words(design: Any, what: str) -> str:
    """How a repeats=auto run's verdicts were decided, in words (docs/analysis.md#repeats-auto)."""
    race = "; analysis.objective=fastest: a cell clearly behind the leader is dropped from the race" \
        if design.race else ""
    return (f"judged on: {what}; repeats=auto: after each round, a t-test on the log of each repeat's value, "
            f"{design.spending} spending of alpha {design.alpha:g} over the looks and Holm at each look; a cell "
            f"stops once decided (faster or slower: significant and past {design.min_effect * 100:g}%; within "
            f"{design.min_effect * 100:g}%: its interval inside, or significant but smaller; no detectable change: "
            f"under {design.futility * 100:g}% predictive power left of ending faster or slower), at its maximum "
            f"({design.max_repeats} repeats), or at the budget{race}; the other metrics' verdicts come from the same "
            f"looks over the "
            f"repeats each cell ran (undecided: not decided by the time the cell stopped); the interval is the "
            f"look's (1 - 2 alpha) repeated interval; ratio = cell / baseline (geometric means)")


def run_facts(records: Sequence[Dict[str, Any]], analysis: Analysis) -> List[str]:
    """Where and what: sweep, run, machine, trial counts, what was judged."""
    if not records:
        return ["no trial records", judged(analysis)]
    first = next((r for r in records if r.get("fingerprint")), records[0])
    fp = first.get("fingerprint") or {}
    gpu = f"{fp.get('gpu_count', 0)} x {fp.get('gpu_name')}" if fp.get("gpu_name") else "no GPU"
    failed = sum(1 for r in records if r.get("status") != "ok")
    return [f"sweep `{first.get('sweep')}`, run `{first.get('run_id')}`: {len(records)} trial(s) in "
            f"{len(analysis.cells)} cell(s), {failed} did not finish",
            f"machine: {fp.get('host', '?')}, {fp.get('cpu_model', '?')} ({fp.get('cpu_count', '?')} CPUs), {gpu}, "
            f"torch {fp.get('torch', '?')}, python {fp.get('python', '?')}",
            judged(analysis)]


def fleet(analysis: Analysis) -> Table:
    """Each device of the fleet against its peers (sweeper/analysis/fleet.py); no rows when
    no cell ran on two devices or more."""
    labels = dict(zip(analysis.cells["cell_id"], analysis.cells["cell"])) if not analysis.cells.empty else {}
    header = ["cell", "device", "node", "repeats", "items/s", "peers items/s", "ratio", "p (Holm)", "verdict",
              "outlier", "SM clock MHz", "temp C", "power W"]
    rows = [[labels.get(r["cell_id"], r["cell_id"]), str(r["device"]), str(r["node"])[:12], str(r["repeats"]),
             num(r["items_per_s"], 1.0, 1), num(r["peers_items_per_s"], 1.0, 1), num(r["ratio"], 1.0, 3),
             pvalue(r["p_adj"]), r["verdict"], "OUTLIER" if r["outlier"] else "", num(r["sm_clock_mhz"], 1.0, 0),
             num(r["temp_c"], 1.0, 0), num(r["power_w"], 1.0, 0)] for r in analysis.fleet.to_dict("records")]
    return header, rows


def failures(records: Sequence[Dict[str, Any]]) -> Table:
    header = ["trial", "status", "error", "overrides"]
    rows = [[r["trial_id"], r["status"], f"{r.get('error_type')}: {(r.get('error_message') or '')[:100]}",
             " ".join(r.get("overrides", []))] for r in records if r.get("status") != "ok"]
    return header, rows


def phase_means(steps: pd.DataFrame, analysis: Analysis) -> pd.DataFrame:
    """Mean seconds per step of each phase, per cell (means add up to the step; medians do not)."""
    phases = [c for c in steps.columns if c.startswith("phase_") and c.endswith("_s")] if not steps.empty else []
    if not phases or analysis.repeats.empty:
        return pd.DataFrame()
    measured = measured_steps(steps)
    joined = measured.merge(analysis.repeats[["trial_id", "cell_id"]], on="trial_id")
    means = joined.groupby("cell_id")[phases].mean().fillna(0.0)
    means = means.reindex([c for c in _order(analysis) if c in means.index])
    labels = analysis.cells.set_index("cell_id")["cell"]
    means.index = [labels.get(c, c) for c in means.index]
    return means.rename(columns=lambda c: c[len("phase_"):-len("_s")])


OVERLAP_TEXT = ("Per step, the mean time in data phases (data_wait + h2d) and in compute phases "
                "(forward + backward + optimizer + comm), measured one after the other; with perfect overlap "
                "a step would take the larger of the two. The saving is the share of the mean step that "
                "overlap could remove (median over repeats).")
SCALING_TEXT = ("Throughput per rank against the world-size-1 cell with the same other settings: "
                "1.000 is perfect scaling.")


def overlap_table(analysis: Analysis) -> Table:
    """Per cell with a data and a compute phase: their means, measured sum, perfect overlap, saving."""
    from sweeper.analysis.overlap import COLUMNS

    header = ["cell", "data ms", "compute ms", "measured sum ms", "perfect overlap ms", "overlap saves"]
    cells = cell_rows(analysis)
    rows = [[str(row["cell"]), *(num(row.get(c), 1e3, 2) for c in COLUMNS[:4]),
             num(row.get("overlap_saving"), 100.0, 1) + "%"]
            for row in (cells[c] for c in _order(analysis)) if num(row.get("overlap_data_s")) != "-"]
    return header, rows


def scaling_table(analysis: Analysis) -> Table:
    """Per cell when world size is swept: throughput, per rank, and efficiency against world size 1."""
    from sweeper.analysis.cost import world_size_axis

    axis = world_size_axis(analysis.axes)
    if axis is None or "scaling_efficiency" not in analysis.cells.columns:
        return [], []
    label = analysis.workload.items_label
    header = ["cell", "world size", f"{label}/s", f"{label}/s per rank", "scaling efficiency"]
    cells = cell_rows(analysis)
    rows = [[str(row["cell"]), num(row.get(axis), 1.0, 0), figure(row, "items_per_s"),
             figure(row, "items_per_s_per_rank"), num(row.get("scaling_efficiency"), 1.0, 3)]
            for row in (cells[c] for c in _order(analysis))]
    return header, rows


def pitfall_lines(analysis: Analysis) -> List[str]:
    """One line per cell and warning: "cell: message (n of N repeats)", in cell order."""
    found = analysis.pitfalls
    if found is None or found.empty:
        return []
    repeats = analysis.cells.set_index("cell_id")["repeats"]
    lines = []
    for cell_id in _order(analysis):
        mine = found[found["cell_id"] == cell_id]
        for code, group in mine.groupby("code", sort=False):
            total = int(repeats.get(cell_id, len(group)))
            lines.append(f"{group['cell'].iloc[0]}: [{code}] {group['message'].iloc[0]} "
                         f"({len(group)} of {total} repeat(s))")
    return lines


def pairs(analysis: Analysis) -> List[str]:
    """Each microbenchmark's own comparison, one line per cell (analysis/pairs.py); the last lines
    of the terminal and the report."""
    return pair_lines(analysis.pairs)
