"""At the end of a sweep: report.html and report.md in the run folder, from the run's Analysis.

Off with `report.enabled=false`. The analysis settings (baseline, metric, heatmap axes,
constraints) were applied when the Analysis was computed; the terminal prints its
verdicts from the same Analysis (sweeper.publishers.terminal), not from report.md.
"""
from __future__ import annotations

from typing import Any, Dict, Optional


def enabled(root: Dict[str, Any]) -> bool:
    return bool((root.get("report") or {}).get("enabled", True))


def on_sweep_end(end) -> Optional[str]:
    """report.html/md from the end's Analysis (a publishers.SweepEnd), when report.enabled."""
    if not enabled(end.root) or not end.data.records:
        return None
    from sweeper.report import write_report

    write_report(end.run, end.data, end.analysis, end.alert_lines())
    return None
