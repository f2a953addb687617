"""The CI gate: is a candidate run worse than a baseline run, cell by cell?

    python -m sweeper.compare BASELINE_RUN CANDIDATE_RUN --metric p95 --max-ratio 1.15 [--json out.json]

Each run is analysed once (sweeper.analysis.run.analyze_run): a cell's figures and its
per-repeat values are that Analysis' own, the ones its report, terminal table and
cells.parquet show. Cells are matched by cell_id (then, for cells left over, by
identical swept values, with a warning). When a matched cell's stored config differs
between the runs (trials/<id>/config.yaml), the settings that differ are named.

A cell is WORSE when its metric is significantly worse than max-ratio x the baseline's:
step times (p50, p95) above baseline x max-ratio; throughput below baseline / max-ratio.

- with enough repeats on both sides (Mann-Whitney can reach alpha): the baseline's
  per-repeat values are scaled by max-ratio and compared with the candidate's
  (two-sided Mann-Whitney over repeats, Holm across cells; worse = significant
  and beyond). The repeat is the unit of evidence.
- otherwise (single repeats): the 95% bootstrap interval of the ratio of the
  metric over the pooled measured steps must lie wholly beyond max-ratio. WEAKER:
  steps of one process share its luck, so this interval is too narrow and a
  process-to-process difference can pass for a regression. Use repeats >= 5.

A cell that finished in the baseline but not in the candidate is worse too.
Exit: 0 nothing worse, 1 a cell is worse, 2 bad input (one line on stderr).

Runs whose trials ran on different machines (sweeper.fingerprint: GPU, driver, CUDA, torch,
CPU, ...) are refused, naming the fields that differ, as pyperf refuses them: a comparison
across machines compares the machines too. --mix-machines compares them anyway, with a warning.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

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
    base: float                 # the cell's figure in each run's Analysis (median over repeats): s or items/s
    cand: float
    ratio: float                # cand / base
    low: float
    high: float
    test: str                   # REPEATS, STEPS, or why none ran
    p_adjusted: float
    worse: bool
    settings_differ: Dict[str, List[Any]] = field(default_factory=dict)   # dotted key -> [base, candidate]


@dataclass
class Run:
    path: Path
    data: Any                   # RunData
    analysis: Any               # Analysis


# --------------------------------------------------------------------------- loading and matching


def load(path: str, metric: str = "p95") -> Run:
    from sweeper.analysis.run import analyze_run
    from sweeper.schema import AnalysisConfig

    run = Path(path)
    if not run.is_dir():
        raise InputError(f"{path}: no such run folder; give one, e.g. results/<sweep>/<run id>")
    if not (run / "summary.parquet").exists():
        raise InputError(f"{path}: not a run folder (no summary.parquet); give results/<sweep>/<run-id>")
    data, analysis = analyze_run(run, AnalysisConfig(metric=metric))
    if analysis.cells.empty:
        raise InputError(f"{path}: the run has no trials")
    return Run(run, data, analysis)


def _swept(cells, cell_id: str, axes: Sequence[str]) -> tuple:
    from sweeper.analysis.text import value_text

    row = cells[cells["cell_id"] == cell_id].iloc[0]
    return tuple((a, value_text(row[a])) for a in axes)


def match_cells(base: Run, cand: Run) -> List[tuple]:
    """[(base cell id, candidate cell id, how)]: by cell_id, then leftovers by swept values."""
    base_ids = list(base.analysis.cells["cell_id"])
    cand_ids = list(cand.analysis.cells["cell_id"])
    pairs = [(c, c, "cell_id") for c in base_ids if c in set(cand_ids)]
    left_base = [c for c in base_ids if c not in set(cand_ids)]
    left_cand = {_swept(cand.analysis.cells, c, cand.analysis.axes): c for c in cand_ids if c not in set(base_ids)}
    for c in left_base:
        key = _swept(base.analysis.cells, c, base.analysis.axes)
        if key and key in left_cand:
            pairs.append((c, left_cand.pop(key), "swept values"))
    return pairs


# --------------------------------------------------------------------------- settings


def cell_config(run: Run, cell_id: str) -> Optional[Dict[str, Any]]:
    """One stored trial config of the cell (a finished trial's when there is one), flattened."""
    import yaml

    from sweeper.results import flatten

    summary = run.data.summary
    trials = summary[summary["cell_id"] == cell_id].sort_values("status", key=lambda s: s != "ok")
    for trial_id in trials["trial_id"]:
        path = run.path / "trials" / str(trial_id) / "config.yaml"
        if path.exists():
            return flatten(yaml.safe_load(path.read_text()) or {})
    return None


def settings_differ(base: Optional[Dict[str, Any]], cand: Optional[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """{dotted key: [baseline value, candidate value]} of the settings that differ, those that
    shape a trial (sweeper.schema.roles: measurement and placement; how results are judged and
    where they go are left out); a key one side lacks reads "(absent)"."""
    from sweeper.schema.roles import shapes_trials

    if base is None or cand is None:
        return {}
    absent = "(absent)"
    keys = [k for k in sorted(set(base) | set(cand)) if shapes_trials(k)]
    return {k: [base.get(k, absent), cand.get(k, absent)] for k in keys
            if (k in base) != (k in cand) or base.get(k) != cand.get(k)}


def _setting_text(value: Any) -> str:
    return "null" if value is None else str(value)


def differ_line(result: CellResult) -> str:
    changes = "; ".join(f"{k} {_setting_text(a)} -> {_setting_text(b)}" for k, (a, b) in result.settings_differ.items())
    return f"cell {result.cell_id} ({result.cell}): settings differ: {changes}"


# --------------------------------------------------------------------------- judging one cell


def _repeat_values(run: Run, cell_id: str, metric: str):
    from sweeper.analysis.model import COLUMN

    table = run.analysis.repeats[run.analysis.repeats["cell_id"] == cell_id]
    return table[COLUMN[metric]].dropna().to_numpy(dtype=float), list(table["trial_id"])


def _cell_figure(run: Run, cell_id: str, metric: str) -> float:
    from sweeper.analysis.model import COLUMN

    cells = run.analysis.cells
    return float(cells.loc[cells["cell_id"] == cell_id, COLUMN[metric]].iloc[0])


def _pooled_steps(run: Run, trial_ids: Sequence[str]) -> Tuple[Any, Any]:
    """(seconds, items) of the cell's measured steps."""
    import numpy as np

    from sweeper.analysis.repeats import measured_steps

    steps = measured_steps(run.data.steps)
    steps = steps[steps["trial_id"].isin(trial_ids)]
    items = steps["items"].to_numpy(dtype=float) if "items" in steps else np.full(len(steps), np.nan)
    return steps["step_s"].to_numpy(dtype=float), items


def _steps_ratio(base: Run, cand: Run, a_trials, b_trials, metric: str) -> Tuple[float, float, float]:
    from sweeper.analysis import bootstrap

    (sa, ia), (sb, ib) = _pooled_steps(base, a_trials), _pooled_steps(cand, b_trials)
    if metric == "throughput":
        return bootstrap.throughput_ratio_ci(sa, ia, sb, ib)
    return bootstrap.ratio_ci(sa, sb, metric)


def _beyond(ratio: float, max_ratio: float, metric: str) -> bool:
    """Is cand / base worse than the allowed max_ratio (above it for times, below 1/it for throughput)?"""
    return ratio < 1 / max_ratio if metric == "throughput" else ratio > max_ratio


def judge(base: Run, cand: Run, pairs, metric: str, max_ratio: float, alpha: float) -> List[CellResult]:
    from sweeper.analysis import stats

    higher = metric == "throughput"
    results, scaled, scaled_at = [], [], []
    for base_id, cand_id, how in pairs:
        a, a_trials = _repeat_values(base, base_id, metric)
        b, b_trials = _repeat_values(cand, cand_id, metric)
        label = str(base.analysis.cells.loc[base.analysis.cells["cell_id"] == base_id, "cell"].iloc[0])
        result = CellResult(label, cand_id, how, a.size, b.size, _cell_figure(base, base_id, metric),
                            _cell_figure(cand, cand_id, metric), math.nan, math.nan, math.nan, "", math.nan, False,
                            settings_differ(cell_config(base, base_id), cell_config(cand, cand_id)))
        if a.size == 0 or b.size == 0:
            result.test = "no finished baseline repeat" if a.size == 0 else "no finished candidate repeat"
            result.worse = a.size > 0
        elif stats.min_achievable_p(a.size, b.size) < alpha:
            plain = stats.compare_cells(a, b, alpha, 0.0, higher_is_better=higher)
            result.ratio, result.low, result.high, result.test = plain.ratio, plain.ratio_low, plain.ratio_high, REPEATS
            allowed = a / max_ratio if higher else a * max_ratio
            scaled.append(stats.compare_cells(allowed, b, alpha, 0.0, higher_is_better=higher))
            scaled_at.append(len(results))
        else:
            result.ratio, result.low, result.high = _steps_ratio(base, cand, a_trials, b_trials, metric)
            result.test = STEPS
            result.worse = bool(_beyond(result.high if higher else result.low, max_ratio, metric))
        results.append(result)
    for index, c in zip(scaled_at, stats.apply_holm(scaled)):
        results[index].p_adjusted = c.p_adjusted
        results[index].worse = c.verdict == stats.SLOWER
    return results


# --------------------------------------------------------------------------- output


def _first_fingerprint(run: Run) -> Dict[str, Any]:
    return next((r["fingerprint"] for r in run.data.records if r.get("status") == "ok" and r.get("fingerprint")), {})


def machines_differ(base: Run, cand: Run) -> str:
    """"" when every finished trial of both runs ran on one kind of machine; else one line
    naming the first that did not (as RUN/TRIAL) and the fields that differ."""
    from sweeper.fingerprint import mismatch_line

    return mismatch_line([{**r, "trial_id": f"{run.path.name}/{r['trial_id']}"}
                          for run in (base, cand) for r in run.data.records])


def _unit(metric: str, run: Run) -> Tuple[str, float, Optional[int]]:
    """(header unit, scale, digits) of a figure: ms for step times, items/s for throughput."""
    if metric == "throughput":
        return f"{run.analysis.workload.items_label}/s", 1.0, None
    return f"{metric} ms", 1e3, 2


def _worse_text(metric: str, max_ratio: float) -> str:
    return f"WORSE (< 1/{max_ratio:g}x)" if metric == "throughput" else f"WORSE (> {max_ratio:g}x)"


def table(results: Sequence[CellResult], metric: str, max_ratio: float, unit: Tuple[str, float, Optional[int]]) -> str:
    from sweeper.analysis.text import interval, num, rate_digits, text_table

    name, scale, digits = unit
    header = ["cell", f"base {name}", f"cand {name}", "ratio", "95% CI", "repeats", "test", "p (Holm)", "result"]
    rows = [[r.cell, num(r.base, scale, rate_digits(r.base) if digits is None else digits),
             num(r.cand, scale, rate_digits(r.cand) if digits is None else digits), num(r.ratio, 1.0, 3),
             interval(r.low, r.high, 1.0, 3), f"{r.n_base}/{r.n_cand}", r.test, num(r.p_adjusted, 1.0, 4),
             _worse_text(metric, max_ratio) if r.worse else "ok"] for r in results]
    return text_table(header, rows)


def run(baseline: str, candidate: str, metric: str, max_ratio: float, alpha: float,
        json_path: Optional[str], mix_machines: bool = False) -> int:
    from sweeper.fingerprint import differences

    base, cand = load(baseline, metric), load(candidate, metric)
    mixed = machines_differ(base, cand)
    if mixed and not mix_machines:
        raise InputError(f"the runs ran on different machines: {mixed}; --mix-machines compares them anyway")
    pairs = match_cells(base, cand)
    if not pairs:
        raise InputError("the two runs have no cell in common (neither cell_id nor swept values match)")
    results = judge(base, cand, pairs, metric, max_ratio, alpha)
    diffs = differences(_first_fingerprint(base), _first_fingerprint(cand))
    code = WORSE if any(r.worse for r in results) else OK
    gate = _json(baseline, candidate, metric, max_ratio, alpha, results, diffs, code)
    try:
        _print_results(base, cand, pairs, results, metric, max_ratio, mixed)
    except BrokenPipeError:     # the table's reader went away (`| head -1`): a CI gate still reads the file
        _write_json(json_path, gate)
        raise
    _write_json(json_path, gate)
    return code


def _write_json(json_path: Optional[str], result: Dict[str, Any]) -> None:
    if json_path:
        from sweeper.files import json_text, write_named_file

        write_named_file(Path(json_path), json_text(result, sort_keys=False))


def _print_results(base: Run, cand: Run, pairs, results, metric: str, max_ratio: float, mixed) -> None:
    print(table(results, metric, max_ratio, _unit(metric, base)))
    for result in results:
        if result.settings_differ:
            print(differ_line(result))
    if mixed:
        print(f"warning: the machines differ (--mix-machines): {mixed}")
    _print_unmatched(base, cand, pairs)
    worse = [r for r in results if r.worse]
    print(f"{len(worse)} of {len(results)} cell(s) worse than {max_ratio:g}x the baseline's {metric}"
          + ("" if all(r.test != STEPS for r in results) else
             "; cells tested over steps (single repeats) use the weaker rule, see --help"))
    sys.stdout.flush()          # a reader gone is found here, while the JSON can still be written


def _print_unmatched(base: Run, cand: Run, pairs) -> None:
    in_base = set(base.analysis.cells["cell_id"]) - {p[0] for p in pairs}
    in_cand = set(cand.analysis.cells["cell_id"]) - {p[1] for p in pairs}
    if in_base or in_cand:
        print(f"note: {len(in_base)} cell(s) only in the baseline, {len(in_cand)} only in the candidate: not compared")
    if any(p[2] != "cell_id" for p in pairs):
        print("warning: some cells were matched by their swept values, not their cell_id: their stored configs "
              "differ (the lines above name the settings)")


def _json(baseline, candidate, metric, max_ratio, alpha, results, diffs, code) -> Dict[str, Any]:
    """What --json writes (NaN becomes null there)."""
    return {"baseline": baseline, "candidate": candidate, "metric": metric, "max_ratio": max_ratio, "alpha": alpha,
            "fingerprint_differences": {k: list(v) for k, v in diffs.items()},
            "cells": [asdict(r) for r in results],
            "worse": sum(r.worse for r in results), "exit_code": code}


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    from sweeper.cli import Parser, text
    from sweeper.schema import METRICS

    parser = Parser(prog="python -m sweeper.compare", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", type=text, help="baseline run folder (results/<sweep>/<run-id>)")
    parser.add_argument("candidate", type=text, help="candidate run folder")
    parser.add_argument("--metric", choices=METRICS, default="p95",
                        help="per-repeat figure: throughput (items/s) or a step-time quantile (default p95)")
    parser.add_argument("--max-ratio", type=float, default=1.15,
                        help="allowed slowdown: candidate / baseline step time, or baseline / candidate "
                             "throughput (default 1.15)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level, after Holm (default 0.05)")
    parser.add_argument("--json", dest="json_path", type=text, help="also write the results as JSON here")
    parser.add_argument("--mix-machines", action="store_true",
                        help="compare runs whose trials ran on different machines (refused otherwise)")
    return parser.parse_args(argv)


def check_options(args) -> None:
    """Each option on its own line, with the value given."""
    if not 0 < args.max_ratio < math.inf:           # inf: a gate that can never fail
        raise InputError(f"--max-ratio: must be a number above 0, e.g. 1.15 (15% worse allowed), got {args.max_ratio:g}")
    if not 0 < args.alpha < 1:
        raise InputError(f"--alpha: must be between 0 and 1, e.g. 0.05, got {args.alpha:g}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command behind the one error boundary (sweeper.cli): one line and exit 2 for bad input."""
    from sweeper import cli

    return cli.run(lambda: command(argv))


def command(argv: Optional[Sequence[str]]) -> int:
    try:
        args = parse(argv)
    except SystemExit as exc:   # argparse: --help is 0, a usage error is 2
        return int(exc.code or 0)
    try:
        check_options(args)
        return run(args.baseline, args.candidate, args.metric, args.max_ratio, args.alpha, args.json_path,
                   args.mix_machines)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
