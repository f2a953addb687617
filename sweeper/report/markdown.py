"""report.md: the report's sections (sections.py) as GitHub-flavoured markdown (terminals, PRs)."""
from __future__ import annotations

from typing import List

from sweeper.report.sections import Section, sections
from sweeper.report.tables import Table


def table(t: Table) -> List[str]:
    header, rows = t
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "|".join("---" for _ in header) + "|"] + [line(r) for r in rows]


def render(report) -> str:
    lines = [f"# Sweep report: {report.title}", ""]
    lines += [f"- {fact}" for fact in report.facts] + [""]
    for section in sections(report):
        lines += [f"## {section.title}", ""] + _body(section, report)
    return "\n".join(lines)


def _body(s: Section, report) -> List[str]:
    lines = [s.text, ""] if s.text else []
    if s.table is not None:
        lines += table(s.table) + [""]
    if s.after:         # one paragraph, or a list of them (one per stratum)
        lines += (list(s.after) if len(s.after) == 1 else [f"- {line}" for line in s.after]) + [""]
    lines += [f"- {item}" for item in s.items] + ([""] if s.items else [])
    if s.figures:
        lines += [f"- {f.title}: skipped, {f.note}" if f.png is None else f"![{f.title}]({f.file})"
                  for f in report.figures] + [""]
    return lines
