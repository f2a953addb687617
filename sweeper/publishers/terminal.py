"""The terminal at the end of a sweep: a view of the run's Analysis and of what the history recorded.

    <final table: one row per cell, best first>
    isolation: ..., settings that had no effect, failed trials and how to reproduce each
    results: <run folder>

    verdicts against the baseline (...), noise floor, recommendation, notes
    report: <run>/report.html            (when the report was written)
    history: appended to <store>         (history.enabled), and a REGRESSION line per alert
"""
from __future__ import annotations

from typing import Any, List


def end_text(end: Any) -> str:
    """The text of a publishers.SweepEnd."""
    from sweeper import display
    from sweeper.publishers.report_sink import enabled

    isolation = str((end.root.get("resources") or {}).get("isolation", "node"))
    parts = [display.results_table(end.data, end.analysis), display.footer(end.data, isolation, str(end.run)), "",
             display.verdicts_text(end.analysis)]
    report = end.run / "report.html"
    if enabled(end.root) and report.exists():
        parts.append(f"report: {report}")
    parts.extend(history_lines(end.history))
    return "\n".join(parts)


def history_lines(recorded: Any) -> List[str]:
    """Where the run was appended, and its regressions (a sweeper.history.Recorded, or None):
    last, after the tables, so a regression is the last thing on the screen."""
    if recorded is None:
        return []
    first = recorded.line or f"history: appended to {recorded.store}"      # appended, or why not
    return [first] + [f"  REGRESSION {line}" for line in recorded.lines()]
