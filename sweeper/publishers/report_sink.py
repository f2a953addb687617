"""At the end of a sweep: report.html and report.md in the run folder, from the run's Analysis.

Off with `report.enabled=false`. The analysis settings (baseline, metric, heatmap axes,
constraints) were applied when the Analysis was computed; the terminal prints its
verdicts from the same Analysis (sweeper.publishers.terminal), not from report.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict


def enabled(root: Dict[str, Any]) -> bool:
    return bool((root.get("report") or {}).get("enabled", True))


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> None:
    if not enabled(root) or not data.records:
        return
    from sweeper.report import write_report

    write_report(run, data, analysis)
