"""The report's sections, in order: what report.md and report.html each render in their own
markup (markdown.py, html.py), so that the two say the same things in the same order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from sweeper.report.tables import OVERLAP_TEXT, SCALING_TEXT, Table

FLEET_TEXT = ("Each device (a GPU by its UUID, or a node) against its peers over repeats: Mann-Whitney, Holm across "
              "the cell's devices; OUTLIER: significantly slower and beyond the minimum effect. SM clock, "
              "temperature and power are NVML means (blank without a GPU).")
STATISTICS_TEXT = ("Intervals are 95% bootstrap intervals: over repeats, then steps (CI over: repeats), or over "
                   "one process's steps only (CI over: steps), which is too narrow to compare cells with.")


@dataclass(frozen=True)
class Section:
    title: str
    text: str = ""                     # a paragraph under the title
    table: Optional[Table] = None
    marked: Tuple[int, ...] = ()       # the table's columns whose first word names the cell's colour (html)
    after: Tuple[str, ...] = ()        # paragraphs after the table: the noise floor, one per stratum
    items: Tuple[str, ...] = ()        # a list
    warnings: bool = False             # the list's items are warnings (html colours them)
    figures: bool = False              # the report's figures go here


def sections(report) -> List[Section]:
    """Every section the report has for this run, in order; a section with nothing to say is left out."""
    out = []
    if report.verdicts[1]:     # none when every cell is alone in its stratum (a run of microbenchmarks)
        marked = tuple(i for i, h in enumerate(report.verdicts[0]) if h.endswith("verdict"))
        out.append(Section(report.verdicts_title, table=report.verdicts, marked=marked,
                           after=tuple(report.noise_floor.split("\n"))))
    if report.fleet and report.fleet[1]:
        out.append(Section("Fleet: each device against its peers", FLEET_TEXT, report.fleet,
                           marked=(report.fleet[0].index("outlier"),)))
    out += [Section(title, items=tuple(lines), warnings=warn) for title, lines, warn in (
        ("Recommendation", report.recommendation, False), ("Notes", report.notes, True),
        (f"Regressions across nights ({len(report.regressions)})", report.regressions, True),
        ("Warnings", report.pitfalls, True)) if lines]
    out += [Section(title, text, t) for title, text, t in (
        ("Overlap projection", OVERLAP_TEXT, report.overlap), ("Scaling efficiency", SCALING_TEXT, report.scaling))
        if t[1]]
    out += [Section("Cell statistics", STATISTICS_TEXT, report.statistics), Section("Figures", figures=True)]
    if report.failures[1]:
        out.append(Section("Trials that did not finish", table=report.failures))
    if report.pairs:
        out.append(Section("Each microbenchmark's own comparison (a / b)", items=tuple(report.pairs)))
    return out
