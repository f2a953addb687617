"""report.md: the report's tables and findings as GitHub-flavoured markdown (terminals, PRs)."""
from __future__ import annotations

from typing import List

from sweeper.report.tables import OVERLAP_TEXT, SCALING_TEXT, Table


def table(t: Table) -> List[str]:
    header, rows = t
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "|".join("---" for _ in header) + "|"] + [line(r) for r in rows]


FLEET_TEXT = ("Each device (a GPU by its UUID, or a node) against its peers over repeats: Mann-Whitney, Holm across the cell's devices; OUTLIER: significantly slower and beyond the minimum effect. SM clock, temperature and power are NVML means (blank without a GPU).")


def render(report) -> str:
    lines = [f"# Sweep report: {report.title}", ""]
    lines += [f"- {fact}" for fact in report.facts] + [""]
    floor = report.noise_floor.split("\n")       # one line per stratum: a list, else the one paragraph
    floor = floor if len(floor) == 1 else [f"- {line}" for line in floor]
    if report.verdicts[1]:     # none when every cell is alone in its stratum (a run of microbenchmarks)
        lines += [f"## {report.verdicts_title}", ""] + table(report.verdicts) + ["", *floor, ""]
    if report.fleet and report.fleet[1]:
        lines += ["## Fleet: each device against its peers", "", FLEET_TEXT, ""] + table(report.fleet) + [""]
    if report.recommendation:
        lines += ["## Recommendation", ""] + [f"- {line}" for line in report.recommendation] + [""]
    if report.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in report.notes] + [""]
    if report.regressions:
        lines += [f"## Regressions across nights ({len(report.regressions)})", ""]
        lines += [f"- {line}" for line in report.regressions] + [""]
    if report.pitfalls:
        lines += ["## Warnings", ""] + [f"- {line}" for line in report.pitfalls] + [""]
    if report.overlap[1]:
        lines += ["## Overlap projection", "", OVERLAP_TEXT, ""] + table(report.overlap) + [""]
    if report.scaling[1]:
        lines += ["## Scaling efficiency", "", SCALING_TEXT, ""] + table(report.scaling) + [""]
    lines += ["## Cell statistics", "", "Intervals are 95% bootstrap intervals: over repeats, then steps "
              "(`CI over` = repeats), or over one process's steps only (`steps`), which is too narrow to "
              "compare cells with.", ""] + table(report.statistics) + [""]
    lines += ["## Figures", ""]
    for figure in report.figures:
        if figure.png is None:
            lines.append(f"- {figure.title}: skipped, {figure.note}")
        else:
            lines.append(f"![{figure.title}]({figure.file})")
    lines.append("")
    if report.failures[1]:
        lines += ["## Trials that did not finish", ""] + table(report.failures) + [""]
    if report.pairs:
        lines += ["## Each microbenchmark's own comparison (a / b)", ""] + [f"- {line}" for line in report.pairs] + [""]
    return "\n".join(lines)
