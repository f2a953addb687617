"""A night as the history reads it: the records an overnight suite's night folder holds.

    <night>/night.json                       the suite's manifest: its sweeps, what it skipped
    <night>/<sweep>/<stamp>/                 each sweep's run folder
        history_alerts.json                  what that sweep's end appended and found (sweeper.history)
        fleet.parquet                        its devices against their peers (every_device runs)

`read_night` turns them into a `Night`, the data the morning report (sweeper.history.morning)
renders. Reads files only; imports no view.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from sweeper.errors import SweeperError
from sweeper.history import read_recorded
from sweeper.storepath import NIGHT_MANIFEST, night_store

FLEET_FILE = "fleet.parquet"      # written by sweeper/publishers/cells_files.py on every_device runs


@dataclass
class Night:
    """What the report is of: the night's runs, and what the suite's manifest adds."""
    run_dirs: List[Path] = field(default_factory=list)
    skipped: List[Dict[str, Any]] = field(default_factory=list)
    outliers: List[Dict[str, Any]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    title: str = ""


def night_runs(night: Path, manifest: Dict[str, Any]) -> List[Path]:
    """The run folders of the sweeps the night ran (<night>/<sweep>/<stamp>)."""
    return [Path(night) / s["run"] for s in manifest.get("sweeps", []) if s.get("run")
            and (Path(night) / s["run"] / "trials").is_dir()]


def store_of(night: Path, manifest: Dict[str, Any]) -> Path:
    """The store the night's sweeps appended to (what they wrote down), else the night's default."""
    for run in night_runs(night, manifest):
        store = (read_recorded(run) or {}).get("store")
        if store:
            return Path(store)
    return night_store(Path(night))


def night_alerts(night: Path, manifest: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The alerts each of the night's sweeps found when it ended (dicts of sweeper.history.Alert)."""
    return [a for run in night_runs(night, manifest) for a in (read_recorded(run) or {}).get("alerts", [])]


def run_notes(run_dirs: Sequence[Path]) -> List[str]:
    """The notes each run's end recorded (a W&B alert skipped, a view that failed)."""
    return [n for run in dict.fromkeys(map(str, run_dirs)) for n in (read_recorded(Path(run)) or {}).get("notes", [])]


def read_night(folder: Path, manifest: Optional[Dict[str, Any]] = None) -> Night:
    """An overnight suite's night folder (its night.json, or the `manifest` given): the runs of
    its sweeps, what it skipped, and the fleet's outlier GPUs or nodes where it compared them."""
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
