"""What the driver prints: one progress line per finished trial, then the sweep's end.

`progress_line` formats one trial's record. The end of a sweep (`results_table`,
`footer`, `verdicts_text`) is a view of the run's one Analysis, formatted by the same
functions (sweeper.report.tables) that report.md uses. Pure text, tested by comparing
strings. Imports nothing heavy until the sweep's end.
"""
from __future__ import annotations

import math
import shlex
from typing import Any, Dict, Set

ISOLATION_WORDS = {
    "node": "one trial per node at a time",
    "gpu": "one trial per GPU",
    "pack": "trials packed by their CPU and GPU requests",
}


def short_key(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _num(value: Any, scale: float = 1.0, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value * scale:,.{digits}f}"


def _swept_text(swept: Dict[str, Any]) -> str:
    """key=value per measurement setting (sweeper.schema.roles: not where the run went or how
    it ran), keys as short as the tables make them and as long as they must be to stay apart."""
    from sweeper.analysis.text import short_keys
    from sweeper.schema import measurement_keys

    keys = measurement_keys(swept)
    names = short_keys(keys)
    return " ".join(f"{names[k]}={swept[k]}" for k in keys)


def progress_line(done: int, total: int, record: Dict[str, Any], wall_s: float) -> str:
    summary = record.get("summary", {})
    status = record["status"]
    width = len(str(total))
    if status == "ok":
        items = (record.get("workload_spec") or {}).get("items_label") or "items"
        figures = (f"{_num(summary.get('items_per_s'), digits=0)} {items}/s  "
                   f"p50 {_num(summary.get('step_p50_s'), 1e3, 2)} ms")
    else:
        figures = f"{record.get('error_type')}: {(record.get('error_message') or '')[:80]}"
    return (f"[{done:>{width}}/{total}] {status:<7} {record['trial_id']}  "
            f"{_swept_text(record.get('swept', {}))}  {figures}  ({wall_s:.1f} s)")


def _pin_memory_ineffective(summary) -> Set[str]:
    """Cells asked for pin_memory=True where the trial said it had no effect (no CUDA device)."""
    columns = [c for c in summary.columns if short_key(str(c)) == "pin_memory"]
    if not columns or "pin_memory_effective" not in summary.columns:
        return set()
    asked = summary[columns].map(lambda v: str(v).lower() == "true").any(axis=1)
    ignored = summary["pin_memory_effective"].map(lambda v: v is False or str(v).lower() == "false")
    return set(summary.loc[asked & ignored, "cell_id"].astype(str))


def _swept_cell(row: Dict[str, Any], axis: str, ineffective: bool) -> str:
    from sweeper.analysis.text import value_text

    text = value_text(row.get(axis))
    return f"{text}*" if ineffective and short_key(axis) == "pin_memory" and text.lower() == "true" else text


def results_table(data, analysis) -> str:
    """One row per cell, best first by the analysis metric: swept values, items/s (the
    workload's own word), p50 ms, p95 ms, the workload's headline figures, status, cell id;
    cells with no finished repeat last. Every figure is the analysis' own."""
    from sweeper.analysis.text import text_table
    from sweeper.report import tables

    ineffective = _pin_memory_ineffective(data.summary) if "cell_id" in data.summary else set()
    figures = tables.figures(analysis)
    header = (tables.stratum_header(analysis) + [analysis.names[a] for a in analysis.axes] + [f[1] for f in figures]
              + ["status", "cell"])
    rows = [[str(row[h]) for h in tables.stratum_header(analysis)]
            + [_swept_cell(row, a, row["cell_id"] in ineffective) for a in analysis.axes]
            + [tables.figure(row, c, scale, digits) for c, _, scale, digits in figures]
            + [str(row["status"]), str(row["cell_id"])] for row in tables.best_first(analysis)]
    first = len(tables.stratum_header(analysis)) + len(analysis.axes)
    return text_table(header, rows, set(range(first, first + len(figures))))


def _shell_word(text: str) -> str:
    """An override as a shell word: bare when safe, "double-quoted" around Hydra's single quotes."""
    if text == shlex.quote(text):
        return text
    return f'"{text}"' if not any(c in text for c in '"$`\\!') else shlex.quote(text)


def footer(data, isolation: str, run_path: str) -> str:
    """Isolation, settings that had no effect, how to reproduce each failed trial, where results are."""
    lines = [f"isolation: {isolation} ({ISOLATION_WORDS.get(isolation, isolation)})"]
    if "cell_id" in data.summary and _pin_memory_ineffective(data.summary):
        lines.append("* pin_memory=True had no effect: no CUDA device in the trial")
    failed = [r for r in data.records if r.get("status") != "ok" and not _cut_short(r)]
    cut = sum(1 for r in data.records if _cut_short(r))
    if cut:
        lines.append(f"{cut} trial(s) were cut short (the sweep was stopped, or its Ray node died), not failed by "
                     f"themselves; the same command with resume=latest runs them again")
    if failed:
        lines.append(f"{len(failed)} trial(s) did not finish; to reproduce one:")
        lines += [f"  python -m sweeper {' '.join(_shell_word(o) for o in r.get('overrides', []))}"
                  f"  # {r.get('status')}: {r.get('error_type')}" for r in failed[:10]]
        if len(failed) > 10:
            lines.append(f"  ... and {len(failed) - 10} more (summary.csv lists them)")
    lines.append(f"results: {run_path}")
    return "\n".join(lines)


def _cut_short(record) -> bool:
    """A trial that something outside it ended (a stop, a lost node): nothing of its own to reproduce."""
    return record.get("status") == "cancelled" or record.get("error_type") == "NodeDied"


def verdicts_text(analysis) -> str:
    """The verdicts, noise floor, recommendation, notes, warnings, fleet, and last each
    microbenchmark's own comparison, from the tables report.md prints. A run with nothing to
    judge (each cell alone in its stratum) has no verdicts, noise floor or recommendation."""
    from sweeper.analysis.text import text_table
    from sweeper.report import tables

    lines = _judged_text(analysis) if analysis.judged_strata() else []
    if analysis.notes:
        lines += ["", "notes:"] + [f"  - {note}" for note in analysis.notes]
    warnings = tables.pitfall_lines(analysis)
    if warnings:
        lines += ["", "warnings (docs/analysis.md#warnings):"] + [f"  - {line}" for line in warnings]
    header, rows = tables.fleet(analysis)
    if rows:
        numeric = {i for i, h in enumerate(header) if h not in ("cell", "device", "node", "verdict", "outlier")}
        lines += ["", "fleet: each device against its peers (significantly slower and beyond the minimum "
                  "effect: OUTLIER):", text_table(header, rows, numeric)]
    pairs = tables.pairs(analysis)
    if pairs:     # last: what a run of microbenchmarks is for
        lines += ["", "each microbenchmark's own comparison (a / b):"] + [f"  {line}" for line in pairs]
    return "\n".join(lines).lstrip("\n")


def _judged_text(analysis) -> list:
    """The verdict table, what it judged, the noise floor and the recommendation."""
    from sweeper.analysis.recommend import recommendation_lines
    from sweeper.analysis.text import text_table
    from sweeper.report import tables

    header, rows = tables.verdicts(analysis)
    numeric = {i for i, h in enumerate(header) if h not in ("cell", "stratum") and not h.endswith("verdict")}
    title = tables.verdicts_title(analysis)
    lines = [f"{title[0].lower()}{title[1:]}:", text_table(header, rows, numeric) if rows else "  no cells",
             tables.judged(analysis), tables.noise_floor(analysis), "", "recommendation:"]
    return lines + [f"  {line}" for line in recommendation_lines(analysis)]
