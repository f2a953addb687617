"""The morning report: one self-contained HTML page for a night (figures inline, no script, no
external URL), as report.html is.

In this order, so that a reviewer reads it in a minute: the regressions of the night's runs
(sweeper.history.alerts) and the fleet's outlier GPUs or nodes; per sweep of the night, its
decisions and its recommendation (morning_sweeps.py, as the run's Analysis gave them); one
compact trend row per cell, a sparkline with the last night against the last good night and
the alert, and a full-size plot only for the cells that moved (morning_trends.py; a first
night says in one line that it has no history yet); what changed since the night before
(fingerprint: driver, CUDA, torch, package versions; settings); what the suite skipped; notes
(W&B alert sent or skipped, parts of the night that were not there).

The night is a list of run folders, or an overnight suite's night folder, whose manifest
names its runs, what it skipped and the fleet's outliers (night.json, docs/overnight.md).
"""
from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from sweeper.errors import SweeperError
from sweeper.history import detect, morning_sweeps, morning_trends, store, views
from sweeper.history.night import FLEET_FILE, Night, night_alerts, read_night, run_notes, store_of
from sweeper.report.html import STYLE, table

__all__ = ["FLEET_FILE", "MORNING", "night_end", "render", "write_morning"]
MORNING = "morning.html"


def night_rows(frame: pd.DataFrame, night: Night) -> pd.DataFrame:
    """The store's rows of the night's runs; with no runs named, each series' latest run."""
    if night.run_dirs:
        wanted = {str(Path(r).resolve()) for r in night.run_dirs}
        rows = frame[frame["run_dir"].isin(wanted)]
        missing = wanted - set(rows["run_dir"])
        if missing:
            night.notes.append(f"not in the history store (not appended?): {', '.join(sorted(missing))}")
        return rows
    latest = frame.sort_values("started_at").groupby(["machine", "sweep"]).tail(1)[["machine", "sweep", "run_id"]]
    return frame.merge(latest, on=["machine", "sweep", "run_id"])


# --------------------------------------------------------------------------- the page


def _section(title: str, tbl, empty: str) -> List[str]:
    return [f"<h2>{escape(title)}</h2>"] + (table(tbl) if tbl[1] else [f"<p>{escape(empty)}</p>"])


def _dicts_table(outliers: Sequence[Dict[str, Any]]):
    keys = list(dict.fromkeys(k for o in outliers for k in o))
    return keys, [[_cell_text(o.get(k)) for k in keys] for o in outliers]


def _cell_text(value: Any) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:,.4g}"
    return "-" if value is None else str(value)


def _changes(frame: pd.DataFrame, tonight: pd.DataFrame) -> List[str]:
    parts = []
    for (_, sweep, run_id), rows in tonight.groupby(["machine", "sweep", "run_id"], sort=False):
        before = views.previous_run(frame, rows)
        if before is None:
            parts.append(f"<p>{escape(sweep)} {escape(run_id)}: the first night of this sweep on this machine.</p>")
            continue
        name = f"{sweep} {run_id} against {before['run_id'].iloc[0]}"
        for title, tbl in (("fingerprint", views.fingerprint_changes(before, rows)),
                           ("settings", views.settings_changes(before, rows))):
            parts += ([f"<h3>{escape(name)}: {title}</h3>"] + table(tbl) if tbl[1]
                      else [f"<p>{escape(name)}: no {title} changed.</p>"])
    return parts


CSS = """
table.trends td { vertical-align: middle; } table.trends tr.alert td { background: #f9d9d9; }
table.trends td:last-child, table.trends th:last-child, table.trends td:nth-child(2),
table.trends th:nth-child(2) { text-align: left; }
svg.spark { display: block; } ul.rec li.pick { font-weight: 600; } table.decisions td { white-space: nowrap; }
"""


def _head(title: str) -> List[str]:
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>Morning report: {escape(title)}</title>", f"<style>{STYLE}{CSS}</style>", "</head><body>",
            f"<h1>Morning report: {escape(title)}</h1>"]


def _facts(tonight: pd.DataFrame, settings: detect.Settings) -> List[str]:
    """One line per run of the night, and the alert rule."""
    parts = ["<ul>"] + [f"<li>{escape(f'{r.sweep} {r.run_id} on {r.machine} ({r.date}): {r.cells} cell(s), {int(r.repeats)} repeats, {int(r.failed)} failed')}</li>"
                        for r in store.runs(tonight).itertuples()]
    return parts + [f"<li>alert when a cell is {settings.alert_ratio:g}x worse than its last good night "
                    f"(items/s or p95) and either the test over its repeats says slower (exact Mann-Whitney; Welch's "
                    f"t on logs where the repeats are too few for it; alpha {settings.alpha:g}) or asv's "
                    f"step_detect puts a change point since that night</li>", "</ul>"]


def render(frame: pd.DataFrame, night: Night, settings: detect.Settings, notes: Sequence[str] = ()) -> str:
    """The page; `notes`: what the night's runs recorded when they ended (sweeper.history.night.run_notes).
    First what needs a person (regressions, outlier GPUs), then each sweep's decisions and
    recommendation, then one compact trend row per cell and full plots only for the cells that moved."""
    tonight = night_rows(frame, night)
    if tonight.empty:
        raise SweeperError("the night has no runs in the history store: nothing to report")
    keys = tonight[["machine", "sweep", "cell_id"]].drop_duplicates()
    history = frame.merge(keys, on=["machine", "sweep", "cell_id"])
    assessed = detect.assess(history, settings)
    found = detect.alerts_of(assessed, set(tonight["run_id"]))
    parts = _head(night.title or ", ".join(sorted(set(tonight["date"])))) + _facts(tonight, settings)
    parts += _section(f"Regressions ({len(found)})", views.alerts_table(found),
                      "No cell regressed against its last good night.")
    parts += _section(f"Outlier GPUs and nodes ({len(night.outliers)})", _dicts_table(night.outliers),
                      "No GPU or node was flagged slower than its peers.")
    parts += morning_sweeps.sweeps_section(tonight)
    parts += morning_trends.trends_section(history, assessed, tonight)
    parts += morning_trends.moved_section(morning_trends.up_to(history, tonight), assessed, found)
    parts += ["<h2>What changed since the night before</h2>"] + _changes(frame, tonight)
    parts += _section(f"Skipped ({len(night.skipped)})", _dicts_table(night.skipped), "Nothing was skipped.")
    notes = night.notes + list(notes)
    if notes:
        parts += ["<h2>Notes</h2>", "<ul>"] + [f'<li class="note">{escape(n)}</li>' for n in notes] + ["</ul>"]
    return "\n".join(parts + ["</body></html>", ""])


def write_morning(store_dir: Path, out: Path, run_dirs: Sequence[Path] = (), night: Optional[Path] = None,
                  settings: detect.Settings = detect.Settings(), manifest: Optional[Dict[str, Any]] = None) -> Path:
    """Writes the morning report of the night (a night folder, run folders, or the latest runs)."""
    from sweeper.files import write_named_file

    the_night = read_night(night, manifest) if night else Night(list(run_dirs))
    frame = store.read(store_dir)
    if frame.empty:
        raise SweeperError(f"--store {store_dir} holds no runs: nothing to report")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    notes = run_notes(night_rows(frame, Night(list(the_night.run_dirs)))["run_dir"].drop_duplicates())
    return write_named_file(out, render(frame, the_night, settings, notes))


def night_end(night: Path, manifest: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The overnight suite's regression check (`overnight.alerts: sweeper.history.morning:night_end`):
    the alerts each of the night's sweeps found when it ended (any: the suite exits 3), and
    <night>/morning.html."""
    night = Path(night)
    alerts = night_alerts(night, manifest)
    try:
        path = write_morning(store_of(night, manifest), night / MORNING, night=night, manifest=manifest)
        print(f"morning report: {path}", flush=True)
    except SweeperError as exc:       # nothing to report (no sweep of the night appended to the history)
        print(f"morning report: not written: {exc}", flush=True)
    except Exception as exc:          # the report is never worth the night's exit code
        print(f"warning: morning report failed: {type(exc).__name__}: {exc}", flush=True)
    return alerts
