"""report.html: one self-contained page (figures inline as base64 PNG, CSS inline, no script,
no external URL), so it opens from a CI artifact or a laptop with no network."""
from __future__ import annotations

import base64
from html import escape
from typing import List

from sweeper.report.sections import Section, sections
from sweeper.report.tables import Table

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
td.faster { background: #d9f2e3; } td.slower { background: #f9d9d9; } td.baseline { background: #fde9d6; }
td.within { background: #eef6f0; } td.OUTLIER { background: #f9d9d9; font-weight: bold; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 12px; }
img { max-width: 100%; } .note { color: #8a6d3b; }
"""


def table(t: Table, verdict_columns=()) -> List[str]:
    header, rows = t
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            css = value.split()[0] if i in verdict_columns and value else ""
            cells.append(f'<td class="{css}">{escape(value)}</td>' if css else f"<td>{escape(value)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return out + ["</table>"]


def render(report) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>Sweep report: {escape(report.title)}</title>", f"<style>{STYLE}</style>", "</head><body>",
             f"<h1>Sweep report: {escape(report.title)}</h1>", "<ul>"]
    parts += [f"<li>{escape(fact)}</li>" for fact in report.facts] + ["</ul>"]
    for section in sections(report):
        parts += [f"<h2>{escape(section.title)}</h2>"] + _body(section, report)
    return "\n".join(parts + ["</body></html>", ""])


def _body(s: Section, report) -> List[str]:
    parts = [f"<p>{escape(s.text)}</p>"] if s.text else []
    if s.table is not None:
        parts += table(s.table, s.marked)
    parts += [f"<p>{escape(line)}</p>" for line in s.after]
    item = '<li class="note">{}</li>' if s.warnings else "<li>{}</li>"
    parts += ["<ul>", *(item.format(escape(i)) for i in s.items), "</ul>"] if s.items else []
    return parts + ([_figure(f) for f in report.figures] if s.figures else [])


def _figure(figure) -> str:
    """A figure inline as a base64 PNG, or why it was skipped."""
    if figure.png is None:
        return f'<p class="note">{escape(figure.title)}: skipped, {escape(figure.note)}</p>'
    data = base64.b64encode(figure.png).decode("ascii")
    return (f'<figure><img alt="{escape(figure.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(figure.title)}</figcaption></figure>")
