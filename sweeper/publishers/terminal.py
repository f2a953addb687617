"""The terminal at the end of a sweep: a view of the run's Analysis.

    <final table: one row per cell, best first>
    isolation: ..., settings that had no effect, failed trials and how to reproduce each
    results: <run folder>

    verdicts against the baseline (...), noise floor, recommendation, notes
    report: <run>/report.html            (when the report was written)
    history: appended to <store>         (history.enabled), and a REGRESSION line per alert
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List


def end_text(data: Any, analysis: Any, root: Dict[str, Any], run: Path) -> str:
    from sweeper import display
    from sweeper.publishers.report_sink import enabled

    isolation = str((root.get("resources") or {}).get("isolation", "node"))
    parts = [display.results_table(data, analysis), display.footer(data, isolation, str(run)), "",
             display.verdicts_text(analysis)]
    report = Path(run) / "report.html"
    if enabled(root) and report.exists():
        parts.append(f"report: {report}")
    parts.extend(history_lines(Path(run), root))
    return "\n".join(parts)


def history_lines(run: Path, root: Dict[str, Any]) -> List[str]:
    """Where the history sink appended the run, and its regressions (its file beside the run):
    last, after the tables, so a regression is the last thing on the screen."""
    from sweeper.publishers.history_sink import enabled, read_alerts

    found = read_alerts(run) if enabled(root) else None
    if found is None:
        return []
    first = found.get("line") or f"history: appended to {found['store']}"      # appended, or why not
    return [first] + [f"  REGRESSION {line}" for line in found["lines"]]
