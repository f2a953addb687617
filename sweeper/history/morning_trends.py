"""The morning report's trends: one compact row per cell, and full-size plots only for the cells
that moved.

A row is the cell's items/s over its nights as a sparkline (alerted nights red), the night's
figure against its last good night's, how many times worse, and the alert. A cell whose only
night is this one has no trend yet: its sweep says so in one line instead of a one-point plot.
The figures and the judgement are the history's (detect.assess), computed once by the page.
"""
from __future__ import annotations

import base64
import io
from html import escape
from typing import Dict, List, Sequence, Tuple

import pandas as pd

from sweeper.analysis.text import num, rate_digits
from sweeper.history import detect
from sweeper.report.sparkline import sparkline

SERIES = list(detect.SERIES)
WHAT = {"throughput": "items/s", "p95": "p95"}


def up_to(history: pd.DataFrame, tonight: pd.DataFrame) -> pd.DataFrame:
    """Each series' nights up to and including the night's own run, oldest first."""
    last = tonight.groupby(SERIES)["started_at"].max().rename("_last").reset_index()
    merged = history.merge(last, on=SERIES)
    return merged[merged["started_at"] <= merged["_last"]].drop(columns="_last").sort_values("started_at", kind="stable")


def of_series(frame: pd.DataFrame, key: Tuple[str, str, str]) -> pd.DataFrame:
    """The rows of one series, key = (machine, sweep, cell_id)."""
    return frame[(frame["machine"] == key[0]) & (frame["sweep"] == key[1]) & (frame["cell_id"] == key[2])]


def _tonight(assessed: pd.DataFrame, key: Tuple[str, str, str], run_id: str) -> Dict[str, dict]:
    """metric -> the assessment of the series' night `run_id`."""
    mine = of_series(assessed, key)
    return {r["metric"]: r for r in mine[mine["run_id"] == run_id].to_dict("records")}


def _alerted_runs(assessed: pd.DataFrame, key: Tuple[str, str, str]) -> set:
    mine = of_series(assessed, key)
    return set(mine.loc[mine["alert"].astype(bool), "run_id"])


def alert_text(judged: Dict[str, dict]) -> str:
    """"ALERT items/s 1.34x worse (significant + change point)", one clause per alerted metric."""
    return "; ".join(f"ALERT {WHAT[m]} {r['ratio']:.2f}x worse ({r['evidence']})"
                     for m, r in judged.items() if r.get("alert"))


def compact_row(series: pd.DataFrame, assessed: pd.DataFrame) -> List[str]:
    """[sweep, cell, sparkline (markup), tonight, last good night, its figure, x worse, alert]."""
    last = series.iloc[-1]
    key = (last["machine"], last["sweep"], last["cell_id"])
    judged = _tonight(assessed, key, last["run_id"])
    flagged = _alerted_runs(assessed, key)
    values = series["items_per_s"].astype(float).tolist()
    marked = [i for i, run in enumerate(series["run_id"]) if run in flagged]
    spark = sparkline(values, marked, f"{last['cell']}: items/s over {len(values)} nights")
    t = judged.get("throughput", {})
    return [str(last["sweep"]), str(last["cell"]), spark, _rate(last["items_per_s"]), t.get("baseline_run") or "-",
            _rate(t.get("baseline_value")), _times(t.get("ratio")), alert_text(judged)]


def _rate(value) -> str:
    return num(value, 1.0, rate_digits(value))


def _times(value) -> str:
    text = num(value, 1.0, 2)
    return text if text == "-" else f"{text}x"


COMPACT_HEADER = ["sweep", "cell", "items/s over nights", "last night", "last good night", "its items/s",
                  "x worse", "alert"]
SPARK_COLUMN = 2


def compact_table(rows: Sequence[List[str]]) -> List[str]:
    """The rows as an HTML table; the sparkline column is markup, every other cell text."""
    out = ['<table class="trends">', "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in COMPACT_HEADER) + "</tr>"]
    for row in rows:
        cells = [value if i == SPARK_COLUMN else escape(value) for i, value in enumerate(row)]
        css = ' class="alert"' if row[-1] else ""
        out.append(f"<tr{css}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return out + ["</table>"]


def first_night_lines(nights: pd.DataFrame, tonight: pd.DataFrame) -> List[str]:
    """Per sweep of the night, one line for its cells that have no night before this one."""
    counts = nights.groupby(SERIES).size()
    lines = []
    for (machine, sweep), rows in tonight.groupby(["machine", "sweep"], sort=False):
        new = [r for r in rows.itertuples() if counts.get((machine, sweep, r.cell_id), 0) <= 1]
        if len(new) == len(rows):
            lines.append(f"{sweep} on {machine}: its first night, no history yet: trends start with the next night.")
        elif new:
            names = ", ".join(r.cell for r in new)
            lines.append(f"{sweep} on {machine}: {len(new)} cell(s) new tonight, no history yet: {names}.")
    return [f"<p>{escape(line)}</p>" for line in lines]


def trends_section(history: pd.DataFrame, assessed: pd.DataFrame, tonight: pd.DataFrame) -> List[str]:
    """The compact rows of every cell with more than one night, and the first-night lines."""
    nights = up_to(history, tonight)
    rows = [compact_row(series, assessed) for _, series in nights.groupby(SERIES, sort=False) if len(series) > 1]
    rows.sort(key=lambda row: not row[-1])          # alerted cells first, as on the rest of the page
    parts = [f"<h2>Trends per cell ({len(rows)})</h2>"]
    if rows:
        parts += ["<p>items/s over each cell's nights (from zero; red: alerted nights), the last night against "
                  "the last good night, and the alert; alerted cells first.</p>"] + compact_table(rows)
    return parts + first_night_lines(nights, tonight)


# --------------------------------------------------------------------------- the cells that moved


def trend_png(series: pd.DataFrame, assessed: pd.DataFrame) -> bytes:
    """items/s and p95 (ms) of one cell over nights; alerted nights in red, change points dashed."""
    from sweeper.report.figures import keep_matplotlib_cache_with_the_shards

    keep_matplotlib_cache_with_the_shards()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 2.6), layout="constrained")
    axes = fig.subplots(1, 2)
    x = list(range(len(series)))
    for ax, (metric, (column, _, _)), scale, label in zip(axes, detect.METRICS.items(), (1.0, 1e3),
                                                          ("items/s", "p95 step time (ms)")):
        mine = assessed[assessed["metric"] == metric].set_index("run_id")
        values = series[column].to_numpy(float) * scale
        ax.plot(x, values, marker="o", color="#1b9e77", markersize=4)
        bad = [i for i, r in enumerate(series["run_id"]) if r in mine.index and mine.loc[r, "alert"]]
        ax.scatter(bad, values[bad], color="#d7301f", zorder=3, s=40, label="alert")
        for i, r in enumerate(series["run_id"]):
            if r in mine.index and mine.loc[r, "step"]:
                ax.axvline(i - 0.5, color="#d7301f", linestyle="--", linewidth=1)
        ticks = series["date"] if series["date"].is_unique else series["run_id"]   # several runs a day: their ids
        ax.set_xticks(x, list(ticks), rotation=45, fontsize=7, ha="right")
        ax.set_ylim(bottom=0)              # from zero: a night's noise looks as small as it is
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, metadata={"Software": None})
    return buffer.getvalue()


def _img(png: bytes, alt: str) -> str:
    return (f'<figure><img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            f"<figcaption>{escape(alt)}</figcaption></figure>")


def moved_section(nights: pd.DataFrame, assessed: pd.DataFrame, found: Sequence[detect.Alert]) -> List[str]:
    """A full-size plot per cell that alerted tonight (its nights up to tonight's); none otherwise."""
    moved = list(dict.fromkeys((a.machine, a.sweep, a.cell_id) for a in found))
    parts = [f"<h2>Cells that moved ({len(moved)})</h2>"]
    if not moved:
        return parts + ["<p>No cell moved: no full-size plot.</p>"]
    for key in moved:
        series = of_series(nights, key).sort_values("started_at", kind="stable")
        parts.append(_img(trend_png(series, of_series(assessed, key)),
                          f"{key[1]}: {series['cell'].iloc[-1]} ({key[2]}) on {key[0]}"))
    return parts
