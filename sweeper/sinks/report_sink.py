"""At the end of a sweep: report.html and report.md in the run folder, and the verdicts printed.

Off with `report.enabled=false`. Analysis settings come from the root config's
`analysis:` section (baseline, metric, heatmap axes, constraints).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List


def on_sweep_end(run: Path, records: List[Dict[str, Any]], root: Dict[str, Any]) -> None:
    if not (root.get("report") or {}).get("enabled", True) or not records:
        return
    from sweeper.report import analysis_config, write_report

    html_path, md_path = write_report(run, analysis_config(root.get("analysis")))
    print(_terminal_summary(md_path.read_text()))
    print(f"report: {html_path}")


def _terminal_summary(markdown: str) -> str:
    """The verdicts, noise floor, recommendation and notes sections of report.md."""
    keep, out = False, []
    for line in markdown.splitlines():
        if line.startswith("## "):
            keep = line[3:] in ("Verdicts against the baseline", "Recommendation", "Notes")
        if keep:
            out.append(line)
    return "\n".join(out).rstrip()
