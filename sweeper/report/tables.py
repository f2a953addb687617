"""The report's tables as rows of text cells, shared by report.md and report.html.

Pure formatting over the frames of sweeper.analysis.cells: a table is
(header, rows), every cell already a string, so both renderers print the same
numbers and the golden tests compare text.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from sweeper.analysis import stats
from sweeper.analysis.cells import Analysis

Table = Tuple[List[str], List[List[str]]]


def num(value: Any, scale: float = 1.0, digits: int = 2) -> str:
    try:
        x = float(value) * scale
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(x) else f"{x:,.{digits}f}"


def interval(low: Any, high: Any, scale: float = 1.0, digits: int = 2) -> str:
    a, b = num(low, scale, digits), num(high, scale, digits)
    return "-" if "-" in (a, b) else f"[{a}, {b}]"


def with_interval(row: Dict[str, Any], name: str, scale: float = 1.0, digits: int = 2) -> str:
    text = num(row.get(name), scale, digits)
    ci = interval(row.get(f"{name}_low"), row.get(f"{name}_high"), scale, digits)
    return text if ci == "-" else f"{text} {ci}"


def pvalue(value: Any) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(x) else ("<0.001" if x < 0.001 else f"{x:.3f}")


def _order(analysis: Analysis) -> List[str]:
    """Cell ids in verdict-table order: baseline first, then fastest first."""
    if analysis.verdicts.empty:
        return list(analysis.cells["cell_id"])
    return list(analysis.verdicts["cell_id"])


def cell_statistics(analysis: Analysis) -> Table:
    memory = [(c, h) for c, h in (("gpu_mem_gb", "peak GPU mem GB"), ("host_mem_gb", "peak host mem GB"))
              if c in analysis.cells.columns and analysis.cells[c].notna().any()]
    header = ["cell", "repeats", "failed", "p50 ms", "p95 ms", "mean ms", "std ms", "CV", "items/s",
              *(h for _, h in memory), "CI over"]
    rows = []
    cells = analysis.cells.set_index("cell_id", drop=False)
    for row in cells.loc[_order(analysis)].to_dict("records"):
        mark = " (baseline)" if row.get("cell_id") == analysis.baseline_id else ""
        rows.append([f"{row['cell']}{mark}", str(row["repeats"]), str(row["failed"]),
                     with_interval(row, "p50", 1e3), with_interval(row, "p95", 1e3),
                     with_interval(row, "mean", 1e3), num(row.get("std"), 1e3),
                     with_interval(row, "cv", 1.0, 3), with_interval(row, "items_per_s", 1.0, 0),
                     *(num(row.get(c), 1.0, 3) for c, _ in memory), str(row.get("ci_over", "-"))])
    return header, rows


def verdicts(analysis: Analysis) -> Table:
    m = analysis.metric
    other = "p95" if m == "p50" else "p50"
    header = ["cell", "repeats", f"{m} ms", "items/s", f"{m} ratio", "95% CI", "p (Holm)", "Cliff's delta",
              "verdict", f"{other} ratio", f"{other} verdict"]
    rows = []
    for row in analysis.verdicts.to_dict("records"):
        rows.append([row["cell"], str(row["repeats"]), num(row.get(m), 1e3), num(row.get("items_per_s"), 1.0, 0),
                     num(row.get(f"{m}_ratio"), 1.0, 3),
                     interval(row.get(f"{m}_low"), row.get(f"{m}_high"), 1.0, 3),
                     pvalue(row.get(f"{m}_p_adj")), num(row.get(f"{m}_delta"), 1.0, 2), row[f"{m}_verdict"],
                     num(row.get(f"{other}_ratio"), 1.0, 3), row[f"{other}_verdict"]])
    return header, rows


def noise_floor(analysis: Analysis) -> str:
    c: Optional[stats.Comparison] = analysis.noise_floor
    if analysis.baseline_id is None:
        return "noise floor: no baseline cell, so none"
    if c is None:
        return "noise floor: the baseline has fewer than 2 repeats, so it cannot be compared with itself"
    return (f"noise floor (baseline A/A, its repeats in run order split into two interleaved halves, "
            f"{c.n_a} vs {c.n_b}): {analysis.metric} ratio {num(c.ratio, 1.0, 3)} "
            f"{interval(c.ratio_low, c.ratio_high, 1.0, 3)}, p {pvalue(c.p_value)}: {c.verdict}")


def run_facts(records: Sequence[Dict[str, Any]], analysis: Analysis) -> List[str]:
    """Where and what: sweep, run, machine, trial counts."""
    if not records:
        return ["no trial records"]
    first = next((r for r in records if r.get("fingerprint")), records[0])
    fp = first.get("fingerprint") or {}
    gpu = f"{fp.get('gpu_count', 0)} x {fp.get('gpu_name')}" if fp.get("gpu_name") else "no GPU"
    failed = sum(1 for r in records if r.get("status") != "ok")
    return [f"sweep `{first.get('sweep')}`, run `{first.get('run_id')}`: {len(records)} trial(s) in "
            f"{len(analysis.cells)} cell(s), {failed} did not finish",
            f"machine: {fp.get('host', '?')}, {fp.get('cpu_model', '?')} ({fp.get('cpu_count', '?')} CPUs), {gpu}, "
            f"torch {fp.get('torch', '?')}, python {fp.get('python', '?')}",
            f"metric: per-repeat {analysis.metric} step time; verdicts need significance after Holm "
            f"and an effect of at least the configured minimum"]


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
    measured = steps[~steps["warmup"].astype(bool)] if "warmup" in steps.columns else steps
    joined = measured.merge(analysis.repeats[["trial_id", "cell_id"]], on="trial_id")
    means = joined.groupby("cell_id")[phases].mean().fillna(0.0)
    means = means.reindex([c for c in _order(analysis) if c in means.index])
    labels = analysis.cells.set_index("cell_id")["cell"]
    means.index = [labels.get(c, c) for c in means.index]
    return means.rename(columns=lambda c: c[len("phase_"):-len("_s")])
