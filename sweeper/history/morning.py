"""The morning report: one self-contained HTML page for a night (figures inline, no script, no
external URL), as report.html is.

In this order: the regressions of the night's runs (sweeper.history.alerts) and the fleet's
outlier GPUs or nodes; a trend plot per cell (throughput and p95 over nights, alerts in red,
change points as dashed lines); what changed since the night before (fingerprint: driver,
CUDA, torch, package versions; settings); what the suite skipped; notes (W&B alert sent or
skipped, parts of the night that were not there).

The night is a list of run folders, or an overnight suite's night folder, whose manifest
names its runs, what it skipped and the fleet's outliers (night.json, docs/overnight.md).
"""
from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from sweeper.errors import SweeperError
from sweeper.history import detect, store, views
from sweeper.report.html import STYLE, table

FLEET_FILE = "fleet.parquet"      # written by sweeper/publishers/cells_files.py on every_device runs



@dataclass
class Night:
    """What the report is of: the night's runs, and what the suite's manifest adds."""
    run_dirs: List[Path] = field(default_factory=list)
    skipped: List[Dict[str, Any]] = field(default_factory=list)
    outliers: List[Dict[str, Any]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    title: str = ""


def read_night(folder: Path, manifest: Optional[Dict[str, Any]] = None) -> Night:
    """An overnight suite's night folder (its night.json, or the `manifest` given): the runs of
    its sweeps, what it skipped, and the fleet's outlier GPUs or nodes where it compared them."""
    from sweeper.history import NIGHT_MANIFEST
    from sweeper.history.overnight import night_runs

    path = Path(folder) / NIGHT_MANIFEST
    if manifest is None:
        if not path.exists():
            raise SweeperError(f"--night {folder}: no {NIGHT_MANIFEST} in it (an overnight suite's night folder "
                               f"holds one; results/overnight/<stamp>)")
        manifest = json.loads(path.read_text())
    runs = night_runs(Path(folder), manifest)
    night = Night(runs, _skipped(manifest), fleet_outliers(runs),
                  title=f"{manifest.get('suite') or 'night'} {manifest.get('night') or Path(folder).name}")
    if not any((run / FLEET_FILE).exists() for run in runs):
        night.notes.append("no sweep of the night compared its devices (resources.every_device=true does): "
                           "no outlier GPUs or nodes to show")
    if manifest.get("alerts_error"):
        night.notes.append(f"the suite's regression check failed: {manifest['alerts_error']}")
    return night


def _skipped(manifest: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One row per sweep not started and per sweep whose trials were cut by the budget."""
    rows = [{"sweep": s["name"], "skipped": "the whole sweep (the budget ran out first)"}
            for s in manifest.get("sweeps", []) if s.get("status") == "skipped"]
    planned = set(manifest.get("sweeps_planned") or [])
    rows += [{"sweep": name, "skipped": "the whole sweep (the suite stopped first)"}
             for name in sorted(planned - {s["name"] for s in manifest.get("sweeps", [])})]
    for s in manifest.get("sweeps", []):
        for trial in s.get("skipped_trials") or []:
            rows.append({"sweep": s["name"], "skipped": _trial_text(trial)})
    return rows


def _trial_text(trial: Any) -> str:
    if isinstance(trial, dict):
        what = trial.get("trial_id") or trial.get("cell") or ""
        overrides = " ".join(map(str, trial.get("overrides") or []))
        return f"trial {what} {overrides}".strip()
    return f"trial {trial}"


def fleet_outliers(runs: Sequence[Path]) -> List[Dict[str, Any]]:
    """The devices the Analysis flagged slower than their peers (each run's fleet.parquet, the
    analysis' fleet table as cells_files writes it), with their clocks, temperature and power."""
    rows = []
    for run in runs:
        path = Path(run) / FLEET_FILE
        if not path.exists():
            continue
        fleet = pd.read_parquet(path)
        flagged = fleet[fleet["outlier"].astype(bool)] if "outlier" in fleet else fleet.iloc[0:0]
        for row in flagged.to_dict("records"):
            rows.append({"sweep": Path(run).parent.name, **{k: v for k, v in row.items() if k != "outlier"}})
    return rows


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


# --------------------------------------------------------------------------- figures


def trend_png(series: pd.DataFrame, assessed: pd.DataFrame) -> bytes:
    """items/s and p95 (ms) of one cell over nights; alerted nights in red, change points dashed."""
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


def _run_notes(tonight: pd.DataFrame) -> List[str]:
    """The notes the sweep-end publisher left beside each run (W&B alert sent or skipped)."""
    from sweeper.publishers.history_sink import read_alerts

    notes = []
    for run_dir in tonight["run_dir"].drop_duplicates():
        notes += (read_alerts(Path(run_dir)) or {}).get("notes", [])
    return notes


def render(frame: pd.DataFrame, night: Night, settings: detect.Settings) -> str:
    tonight = night_rows(frame, night)
    if tonight.empty:
        raise SweeperError("the night has no runs in the history store: nothing to report")
    keys = tonight[["machine", "sweep", "cell_id"]].drop_duplicates()
    history = frame.merge(keys, on=["machine", "sweep", "cell_id"])
    assessed = detect.assess(history, settings)
    found = detect.alerts_of(assessed, set(tonight["run_id"]))
    title = night.title or ", ".join(sorted(set(tonight["date"])))
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>Morning report: {escape(title)}</title>", f"<style>{STYLE}</style>", "</head><body>",
             f"<h1>Morning report: {escape(title)}</h1>", "<ul>"]
    parts += [f"<li>{escape(f'{r.sweep} {r.run_id} on {r.machine} ({r.date}): {r.cells} cell(s), {int(r.repeats)} repeats, {int(r.failed)} failed')}</li>"
              for r in store.runs(tonight).itertuples()]
    parts += [f"<li>alert when a cell is {settings.alert_ratio:g}x worse than its last good night "
              f"(items/s or p95) and either the Mann-Whitney test over its repeats says slower (alpha "
              f"{settings.alpha:g}) or asv's step_detect puts a change point since that night</li>", "</ul>"]
    parts += _section(f"Regressions ({len(found)})", views.alerts_table(found),
                      "No cell regressed against its last good night.")
    parts += _section(f"Outlier GPUs and nodes ({len(night.outliers)})", _dicts_table(night.outliers),
                      "No GPU or node was flagged slower than its peers.")
    parts += ["<h2>Trends per cell</h2>"]
    for (machine, sweep, cell_id), series in history.sort_values("started_at").groupby(["machine", "sweep", "cell_id"]):
        label = f"{sweep}: {series['cell'].iloc[-1]} ({cell_id}) on {machine}"
        mine = assessed[(assessed["machine"] == machine) & (assessed["sweep"] == sweep) & (assessed["cell_id"] == cell_id)]
        parts.append(_img(trend_png(series, mine), label))
    parts += ["<h2>What changed since the night before</h2>"] + _changes(frame, tonight)
    parts += _section(f"Skipped ({len(night.skipped)})", _dicts_table(night.skipped), "Nothing was skipped.")
    notes = night.notes + _run_notes(tonight)
    if notes:
        parts += ["<h2>Notes</h2>", "<ul>"] + [f'<li class="note">{escape(n)}</li>' for n in notes] + ["</ul>"]
    return "\n".join(parts + ["</body></html>", ""])


def write_morning(store_dir: Path, out: Path, run_dirs: Sequence[Path] = (), night: Optional[Path] = None,
                  settings: detect.Settings = detect.Settings(), manifest: Optional[Dict[str, Any]] = None) -> Path:
    """Writes the morning report of the night (a night folder, run folders, or the latest runs)."""
    from sweeper.results import write_bytes_atomic

    the_night = read_night(night, manifest) if night else Night(list(run_dirs))
    frame = store.read(store_dir)
    if frame.empty:
        raise SweeperError(f"--store {store_dir} holds no runs: nothing to report")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out, render(frame, the_night, settings).encode())
    return out
