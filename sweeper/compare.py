"""The CI gate: is a candidate run worse than a baseline run, cell by cell?

    python -m sweeper.compare BASELINE_RUN CANDIDATE_RUN --metric p95 --max-ratio 1.15 [--json out.json]

Cells are matched by cell_id (then, for cells left over, by identical swept values,
with a warning: cell ids hash the whole trial config, so a new config key changes them).
A cell is WORSE when its metric is significantly above max-ratio x the baseline's:

- with enough repeats on both sides (Mann-Whitney can reach alpha): the baseline's
  per-repeat values are scaled by max-ratio and compared with the candidate's
  (two-sided Mann-Whitney over repeats, Holm across cells; worse = significant
  and above). The repeat is the unit of evidence.
- otherwise (single repeats): the 95% bootstrap interval of the ratio of the
  metric over the pooled measured steps must lie wholly above max-ratio. WEAKER:
  steps of one process share its luck, so this interval is too narrow and a
  process-to-process difference can pass for a regression. Use repeats >= 5.

A cell that finished in the baseline but not in the candidate is worse too.
Exit: 0 nothing worse, 1 a cell is worse, 2 bad input (one line on stderr).
Machines that differ (fingerprint) are flagged, not refused.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

OK, WORSE, BAD_INPUT = 0, 1, 2
REPEATS, STEPS = "repeats", "steps (weaker)"


class InputError(Exception):
    """Bad input: printed as one line, exit 2."""


@dataclass
class CellResult:
    cell: str
    cell_id: str
    matched_by: str
    n_base: int
    n_cand: int
    base: float                 # median over repeats of the metric, seconds
    cand: float
    ratio: float                # cand / base
    low: float
    high: float
    test: str                   # REPEATS, STEPS, or why none ran
    p_adjusted: float
    worse: bool


# --------------------------------------------------------------------------- loading and matching


def load(path: str):
    from sweeper.analysis.cells import load_run, normalise

    run = Path(path)
    if not run.is_dir():
        raise InputError(f"{path}: no such run folder")
    if not (run / "summary.parquet").exists():
        raise InputError(f"{path}: not a run folder (no summary.parquet); give results/<sweep>/<run-id>")
    data = load_run(run)
    data.summary = normalise(data.summary)
    if data.summary.empty:
        raise InputError(f"{path}: the run has no trials")
    return data


def _swept(summary, cell_id: str) -> tuple:
    from sweeper.analysis.cells import value_text, swept_axes

    row = summary[summary["cell_id"] == cell_id].iloc[0]
    return tuple((a, value_text(row[a])) for a in swept_axes(summary))


def match_cells(base, cand) -> List[tuple]:
    """[(base cell id, candidate cell id, how)]: by cell_id, then leftovers by swept values."""
    base_ids = list(dict.fromkeys(base["cell_id"]))
    cand_ids = list(dict.fromkeys(cand["cell_id"]))
    pairs = [(c, c, "cell_id") for c in base_ids if c in set(cand_ids)]
    left_base = [c for c in base_ids if c not in set(cand_ids)]
    left_cand = {_swept(cand, c): c for c in cand_ids if c not in set(base_ids)}
    for c in left_base:
        key = _swept(base, c)
        if key and key in left_cand:
            pairs.append((c, left_cand.pop(key), "swept values"))
    return pairs


# --------------------------------------------------------------------------- judging one cell


def _repeat_values(data, cell_id: str, metric: str):
    from sweeper.analysis.cells import repeat_table

    table = repeat_table(data.summary[data.summary["cell_id"] == cell_id], data.steps)
    return table[metric].dropna().to_numpy(dtype=float), list(table["trial_id"])


def _pooled_steps(data, trial_ids: Sequence[str]):
    steps = data.steps
    if steps.empty:
        return []
    measured = steps[~steps["warmup"].astype(bool)] if "warmup" in steps.columns else steps
    return measured.loc[measured["trial_id"].isin(trial_ids), "step_s"].to_numpy(dtype=float)


def judge(base, cand, pairs, metric: str, max_ratio: float, alpha: float) -> List[CellResult]:
    from sweeper.analysis import stats
    from sweeper.analysis.cells import cell_label, swept_axes

    results, scaled, scaled_at = [], [], []
    for base_id, cand_id, how in pairs:
        a, a_trials = _repeat_values(base, base_id, metric)
        b, b_trials = _repeat_values(cand, cand_id, metric)
        row = base.summary[base.summary["cell_id"] == base_id].iloc[0]
        label = cell_label({k: row[k] for k in swept_axes(base.summary)}) or base_id
        result = CellResult(label, cand_id, how, a.size, b.size, _median(a), _median(b),
                            math.nan, math.nan, math.nan, "", math.nan, False)
        if a.size == 0 or b.size == 0:
            result.test = "no finished baseline repeat" if a.size == 0 else "no finished candidate repeat"
            result.worse = a.size > 0
        elif stats.min_achievable_p(a.size, b.size) < alpha:
            plain = stats.compare_cells(a, b, alpha, 0.0)
            result.ratio, result.low, result.high, result.test = plain.ratio, plain.ratio_low, plain.ratio_high, REPEATS
            scaled.append(stats.compare_cells(a * max_ratio, b, alpha, 0.0))
            scaled_at.append(len(results))
        else:
            ratio, low, high = stats.ratio_ci(_pooled_steps(base, a_trials), _pooled_steps(cand, b_trials), metric)
            result.ratio, result.low, result.high, result.test = ratio, low, high, STEPS
            result.worse = bool(low > max_ratio)
        results.append(result)
    for index, c in zip(scaled_at, stats.apply_holm(scaled)):
        results[index].p_adjusted = c.p_adjusted
        results[index].worse = c.verdict == stats.SLOWER
    return results


def _median(values) -> float:
    import numpy as np

    return float(np.median(values)) if len(values) else math.nan


# --------------------------------------------------------------------------- output


def _first_fingerprint(data) -> Dict[str, Any]:
    return next((r["fingerprint"] for r in data.records if r.get("status") == "ok" and r.get("fingerprint")), {})


def _num(x: float, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * scale:.{digits}f}"


def table(results: Sequence[CellResult], metric: str, max_ratio: float) -> str:
    header = ["cell", f"base {metric} ms", f"cand {metric} ms", "ratio", "95% CI", "repeats", "test", "p (Holm)",
              "result"]
    rows = [[r.cell, _num(r.base, 1e3), _num(r.cand, 1e3), _num(r.ratio, 1.0, 3),
             f"[{_num(r.low, 1.0, 3)}, {_num(r.high, 1.0, 3)}]" if math.isfinite(r.low) else "-",
             f"{r.n_base}/{r.n_cand}", r.test, _num(r.p_adjusted, 1.0, 4),
             f"WORSE (> {max_ratio:g}x)" if r.worse else "ok"] for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header] + rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths)] + lines[1:])


def run(baseline: str, candidate: str, metric: str, max_ratio: float, alpha: float,
        json_path: Optional[str]) -> int:
    from sweeper.fingerprint import differences

    base, cand = load(baseline), load(candidate)
    pairs = match_cells(base.summary, cand.summary)
    if not pairs:
        raise InputError("the two runs have no cell in common (neither cell_id nor swept values match)")
    results = judge(base, cand, pairs, metric, max_ratio, alpha)
    diffs = differences(_first_fingerprint(base), _first_fingerprint(cand))
    print(table(results, metric, max_ratio))
    for key, (a, b) in diffs.items():
        print(f"warning: the machines differ: {key}: {a} -> {b}")
    _print_unmatched(base.summary, cand.summary, pairs)
    worse = [r for r in results if r.worse]
    code = WORSE if worse else OK
    print(f"{len(worse)} of {len(results)} cell(s) worse than {max_ratio:g}x the baseline's {metric}"
          + ("" if all(r.test != STEPS for r in results) else
             "; cells tested over steps (single repeats) use the weaker rule, see --help"))
    if json_path:
        Path(json_path).write_text(json.dumps(_json(baseline, candidate, metric, max_ratio, alpha, results, diffs,
                                                    code), indent=2, default=str))
    return code


def _print_unmatched(base, cand, pairs) -> None:
    in_base = set(base["cell_id"]) - {p[0] for p in pairs}
    in_cand = set(cand["cell_id"]) - {p[1] for p in pairs}
    if in_base or in_cand:
        print(f"note: {len(in_base)} cell(s) only in the baseline, {len(in_cand)} only in the candidate: not compared")
    if any(p[2] != "cell_id" for p in pairs):
        print("warning: some cells were matched by their swept values, not their cell_id: the trial configs "
              "differ outside the swept axes")


def _json(baseline, candidate, metric, max_ratio, alpha, results, diffs, code) -> Dict[str, Any]:
    def clean(value):
        return None if isinstance(value, float) and not math.isfinite(value) else value
    return {"baseline": baseline, "candidate": candidate, "metric": metric, "max_ratio": max_ratio, "alpha": alpha,
            "fingerprint_differences": {k: list(v) for k, v in diffs.items()},
            "cells": [{k: clean(v) for k, v in asdict(r).items()} for r in results],
            "worse": sum(r.worse for r in results), "exit_code": code}


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sweeper.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="baseline run folder (results/<sweep>/<run-id>)")
    parser.add_argument("candidate", help="candidate run folder")
    parser.add_argument("--metric", choices=("p50", "p95"), default="p95", help="per-repeat step-time quantile")
    parser.add_argument("--max-ratio", type=float, default=1.15, help="allowed candidate / baseline (default 1.15)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level, after Holm (default 0.05)")
    parser.add_argument("--json", dest="json_path", help="also write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as exc:   # argparse: --help is 0, a usage error is 2
        return int(exc.code or 0)
    try:
        if not args.max_ratio > 0 or not 0 < args.alpha < 1:
            raise InputError("--max-ratio must be positive and --alpha between 0 and 1")
        return run(args.baseline, args.candidate, args.metric, args.max_ratio, args.alpha, args.json_path)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
