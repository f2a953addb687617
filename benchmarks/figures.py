"""The figures a GPU session prints, read through the package's own analysis of each run.

    python3 -m benchmarks.figures cells RUN [RUN ...] [--columns items_per_s p50 tokens_per_s]
    python3 -m benchmarks.figures pair RUN --axis train.model --a nanogpt_style:gpt --b null --within 0.03
    python3 -m benchmarks.figures plain --plain plain-0.json ... --runs RUN ... --within 0.05
    python3 -m benchmarks.figures copy --plain plain-runs.jsonl --runs RUN ... --within 0.05
    python3 -m benchmarks.figures fleet RUN

Every sweeper figure here comes from `sweeper.analysis` (cells, repeats, the fleet table), never
recomputed from summary.csv; the plain scripts' figures are read from the JSON they print. One
rule decides "within x%": |sweeper / plain - 1| <= x (`within`).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import pandas as pd

CELL_COLUMNS = ("items_per_s", "p50", "tokens_per_s", "mfu", "peak_memory_allocated_gb", "copy_gbps",
                "overlap_saving", "usd_per_m_tokens", "usd_per_m_samples", "scaling_efficiency", "pitfalls")


# -- the package's analysis -----------------------------------------------------------
def analyse(run: Path):
    """(RunData, Analysis) of one run folder, exactly as `python -m sweeper.report` computes it."""
    from sweeper.analysis.run import analyze_run, run_analysis_config

    return analyze_run(Path(run), run_analysis_config(Path(run)))


def cells(analysis) -> pd.DataFrame:
    from sweeper.analysis.run import cell_summary

    return cell_summary(analysis)


# -- the one comparison rule ----------------------------------------------------------
def median(values: Iterable[float]) -> float:
    kept = [float(v) for v in values if v is not None and v == v]
    return statistics.median(kept) if kept else math.nan


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator and denominator == denominator else math.nan


def within(value: float, tolerance: float) -> bool:
    """Whether a ratio is within `tolerance` of 1 (0.05: within 5%); NaN never is."""
    return value == value and abs(value - 1) <= tolerance + 1e-12     # 1.05 is within 5%, in floats too


def verdict(value: float, tolerance: float) -> str:
    return f"ratio {value:.3f}: {'WITHIN' if within(value, tolerance) else 'NOT within'} {tolerance:.0%}"


# -- subcommands ----------------------------------------------------------------------
def cells_text(run: Path, columns: Sequence[str] = CELL_COLUMNS) -> str:
    """One line per cell (best first), then every failed trial with its error."""
    data, analysis = analyse(run)
    table = cells(analysis)
    shown = ["cell", "status", "repeats", "failed", *(c for c in columns if c in table.columns)]
    lines = [str(run), table[shown].to_string(index=False, float_format=lambda v: f"{v:,.4g}")]
    summary = data.summary
    failed = summary[summary["status"] != "ok"] if "status" in summary else summary.iloc[:0]
    for _, row in failed.iterrows():
        lines.append(f"FAILED {row.get('trial_id')}: {row.get('error_type')} {str(row.get('error_message'))[-300:]}")
    return "\n".join(lines)


def cell_figure(table: pd.DataFrame, axis: str, value: str, metric: str) -> float:
    """The metric of the cell whose `axis` reads `value` ("null" matches an empty value)."""
    if axis not in table:
        return math.nan
    column = table[axis].map(lambda v: "" if pd.isna(v) else str(v))
    rows = table[column == ("" if value in ("null", "None") else value)]
    return float(rows[metric].iloc[0]) if len(rows) else math.nan


def pair_text(run: Path, axis: str, a: str, b: str, metric: str, tolerance: float) -> str:
    table = cells(analyse(run)[1])
    fa, fb = cell_figure(table, axis, a, metric), cell_figure(table, axis, b, metric)
    return f"{metric}: {axis}={a} {fa:.4g}, {axis}={b} {fb:.4g}, {verdict(ratio(fa, fb), tolerance)}"


def repeats_of(runs: Sequence[Path], metric: str) -> List[float]:
    """The metric of every finished repeat of every run (the analysis' per-repeat table)."""
    return [v for run in runs for v in analyse(run)[1].repeats[metric].tolist()]


def plain_values(paths: Sequence[Path]) -> List[float]:
    """Figures from plain scripts' JSON: {"runs": [[figure, ...], ...]} (dali_plain.py) or a list."""
    values: List[float] = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            continue
        values += [run[0] for run in data["runs"]] if isinstance(data, dict) else list(data)
    return values


def plain_text(plain: Sequence[Path], runs: Sequence[Path], metric: str, tolerance: float) -> str:
    ours, theirs = repeats_of(runs, metric), plain_values(plain)
    return (f"plain: {median(theirs):,.1f} (median of {len(theirs)})  sweeper: {median(ours):,.1f} "
            f"(median of {len(ours)} repeats)  {verdict(ratio(median(ours), median(theirs)), tolerance)}")


def copy_key(size_mb, pinned) -> str:
    """plain_copy.py's key for one size and memory kind: '512/pinned', '0.5/pageable'."""
    on = str(pinned).lower() in ("true", "1")
    return f"{float(size_mb):g}/{'pinned' if on else 'pageable'}"


def copy_figures(runs: Sequence[Path], metric: str = "copy_gbps") -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}
    for run in runs:
        table = cells(analyse(run)[1])
        for _, row in table.iterrows():
            key = copy_key(row["workload.params.size_mb"], row["workload.params.pinned"])
            out.setdefault(key, []).append(float(row[metric]))
    return out


def copy_rows(ours: Dict[str, List[float]], plain: List[Dict[str, float]], tolerance: float
              ) -> Tuple[List[str], float]:
    """Per size and kind: sweeper and plain medians, their ratio, and the plain runs against
    themselves (even against odd runs: the floor a 5% comparison stands on)."""
    lines, worst = [], 0.0
    for key in sorted(ours, key=lambda k: (float(k.split("/")[0]), k)):
        ref = [p[key] for p in plain if key in p]
        r = ratio(median(ours[key]), median(ref))
        self_r = ratio(median(ref[0::2]), median(ref[1::2])) if len(ref) >= 2 else math.nan
        worst = max(worst, abs(r - 1)) if r == r else math.inf
        lines.append(f"{key:>14} sweeper {median(ours[key]):8.1f}  plain {median(ref):8.1f}  "
                     f"{verdict(r, tolerance)}  plain/plain {self_r:.3f}")
    return lines, worst


def copy_text(plain_jsonl: Path, runs: Sequence[Path], tolerance: float) -> str:
    plain = [json.loads(line) for line in Path(plain_jsonl).read_text().splitlines() if line.strip()]
    lines, worst = copy_rows(copy_figures(runs), plain, tolerance)
    lines.append(f"copy microbenchmark vs plain torch loop: worst difference {worst:.1%} "
                 f"({'PASS' if worst <= tolerance else 'FAIL'}: must be within {tolerance:.0%})")
    return "\n".join(lines)


def fleet_text(run: Path) -> str:
    fleet = analyse(run)[1].fleet
    if fleet.empty:
        return "no fleet table: one device only, or no trial finished"
    return fleet.to_string(index=False, float_format=lambda v: f"{v:,.4g}")


# -- command line ---------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("cells", help="each run's cells, through the analysis")
    p.add_argument("runs", nargs="*", type=Path)
    p.add_argument("--columns", nargs="+", default=list(CELL_COLUMNS))
    p = sub.add_parser("pair", help="two cells of one run: their ratio")
    p.add_argument("run", type=Path)
    for name in ("--axis", "--a", "--b"):
        p.add_argument(name, required=True)
    p.add_argument("--metric", default="p50")
    p.add_argument("--within", type=float, default=0.05)
    for name, help_ in (("plain", "a plain script's figure against the runs' repeats"),
                        ("copy", "the copy microbenchmark against plain_copy.py, per size and kind")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--plain", nargs="+" if name == "plain" else None, type=Path, required=True)
        p.add_argument("--runs", nargs="*", type=Path, default=[])
        p.add_argument("--metric", default="items_per_s")
        p.add_argument("--within", type=float, default=0.05)
    p = sub.add_parser("fleet", help="each device against its peers")
    p.add_argument("run", type=Path)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    runs = [r for r in getattr(args, "runs", []) if str(r) not in ("", ".")]
    if args.command == "cells":
        text = "\n\n".join(cells_text(run, args.columns) for run in runs) if runs else "(no run folder)"
    elif args.command == "pair":
        text = pair_text(args.run, args.axis, args.a, args.b, args.metric, args.within)
    elif args.command == "plain":
        text = plain_text(args.plain, runs, args.metric, args.within)
    elif args.command == "copy":
        text = copy_text(args.plain, runs, args.within)
    else:
        text = fleet_text(args.run)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
