"""report.html: one self-contained page (figures inline as base64 PNG, CSS inline, no script,
no external URL), so it opens from a CI artifact or a laptop with no network."""
from __future__ import annotations

import base64
from html import escape
from typing import List

from sweeper.report.tables import OVERLAP_TEXT, SCALING_TEXT, Table

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
    verdict_columns = [i for i, h in enumerate(report.verdicts[0]) if h.endswith("verdict")]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>Sweep report: {escape(report.title)}</title>", f"<style>{STYLE}</style>", "</head><body>",
             f"<h1>Sweep report: {escape(report.title)}</h1>", "<ul>"]
    parts += [f"<li>{escape(fact)}</li>" for fact in report.facts] + ["</ul>"]
    if report.verdicts[1]:     # none when every cell is alone in its stratum (a run of microbenchmarks)
        parts += [f"<h2>{escape(report.verdicts_title)}</h2>"] + table(report.verdicts, verdict_columns)
        parts += [f"<p>{escape(line)}</p>" for line in report.noise_floor.split("\n")]
    if report.fleet and report.fleet[1]:
        from sweeper.report.markdown import FLEET_TEXT

        parts += ["<h2>Fleet: each device against its peers</h2>", f"<p>{escape(FLEET_TEXT)}</p>"]
        parts += table(report.fleet, [report.fleet[0].index("outlier")])
    if report.recommendation:
        parts += ["<h2>Recommendation</h2>", "<ul>"]
        parts += [f"<li>{escape(line)}</li>" for line in report.recommendation] + ["</ul>"]
    if report.notes:
        parts += ["<h2>Notes</h2>", "<ul>"] + [f'<li class="note">{escape(n)}</li>' for n in report.notes] + ["</ul>"]
    if report.regressions:
        parts += [f"<h2>Regressions across nights ({len(report.regressions)})</h2>", "<ul>"]
        parts += [f'<li class="note">{escape(line)}</li>' for line in report.regressions] + ["</ul>"]
    if report.pitfalls:
        parts += ["<h2>Warnings</h2>", "<ul>"] + [f'<li class="note">{escape(w)}</li>' for w in report.pitfalls]
        parts += ["</ul>"]
    for title, text, t in (("Overlap projection", OVERLAP_TEXT, report.overlap),
                           ("Scaling efficiency", SCALING_TEXT, report.scaling)):
        if t[1]:
            parts += [f"<h2>{title}</h2>", f"<p>{escape(text)}</p>"] + table(t)
    parts += ["<h2>Figures</h2>"]
    for figure in report.figures:
        if figure.png is None:
            parts.append(f'<p class="note">{escape(figure.title)}: skipped, {escape(figure.note)}</p>')
            continue
        data = base64.b64encode(figure.png).decode("ascii")
        parts.append(f'<figure><img alt="{escape(figure.title)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{escape(figure.title)}</figcaption></figure>")
    parts += ["<h2>Cell statistics</h2>",
              "<p>95% bootstrap intervals: over repeats then steps (CI over = repeats), or over one "
              "process's steps only (steps), which is too narrow to compare cells with.</p>"]
    parts += table(report.statistics)
    if report.failures[1]:
        parts += ["<h2>Trials that did not finish</h2>"] + table(report.failures)
    if report.pairs:
        parts += ["<h2>Each microbenchmark's own comparison (a / b)</h2>", "<ul>"]
        parts += [f"<li>{escape(line)}</li>" for line in report.pairs] + ["</ul>"]
    return "\n".join(parts + ["</body></html>", ""])
