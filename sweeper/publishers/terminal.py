"""The terminal at the end of a sweep: a view of the run's Analysis.

    <final table: one row per cell, best first>
    isolation: ..., settings that had no effect, failed trials and how to reproduce each
    results: <run folder>

    verdicts against the baseline (...), noise floor, recommendation, notes
    report: <run>/report.html            (when the report was written)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict


def end_text(data: Any, analysis: Any, root: Dict[str, Any], run: Path) -> str:
    from sweeper import display
    from sweeper.publishers.report_sink import enabled

    isolation = str((root.get("resources") or {}).get("isolation", "node"))
    parts = [display.results_table(data, analysis), display.footer(data, isolation, str(run)), "",
             display.verdicts_text(analysis)]
    report = Path(run) / "report.html"
    if enabled(root) and report.exists():
        parts.append(f"report: {report}")
    return "\n".join(parts)
