"""History across nights: every finished run appended to a store, trends, and regression alerts.

    from sweeper import history
    found = history.alerts("results/history")            # [Alert]: each cell series' latest night
    found = history.alerts("results/history", runs={"20261201-020000"})

    recorded = history.record_run(run, data, analysis, root)   # a sweep's end: append, then judge

`python -m sweeper.history` lists runs, shows trends and the differences between two nights,
appends old runs and writes the morning report (docs/history.md). Imports no Ray, torch or W&B.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from sweeper.history.detect import Alert, Settings, alerts_of, assess
from sweeper.history.store import append_run, read
from sweeper.storepath import default_dir, history_dir

__all__ = ["Alert", "Recorded", "Settings", "alerts", "append_run", "assess", "default_dir", "enabled",
           "history_dir", "read", "read_recorded", "record_run", "settings_of", "write_recorded"]


# Beside a run: the store its sweep's end appended to, the alerts found, the views' notes. A record
# for the overnight suite's check (another process); views get the same as data (Recorded).
ALERTS_FILE = "history_alerts.json"


@dataclass(frozen=True)
class Recorded:
    """What a sweep's end appended to the history (`line`: where, or why not), and the
    regressions the history found in it."""
    store: Path
    alerts: Tuple[Alert, ...] = ()
    line: str = ""

    def lines(self) -> List[str]:
        return [a.line() for a in self.alerts]


def enabled(root: Dict[str, Any]) -> bool:
    return bool((root.get("history") or {}).get("enabled", True))


def settings_of(root: Dict[str, Any]) -> Settings:
    """Detection settings from a root config's history.* and analysis.* (defaults where absent)."""
    from sweeper.schema import AnalysisConfig, HistoryConfig

    hist = {**HistoryConfig().__dict__, **(root.get("history") or {})}
    analysis = {**AnalysisConfig().__dict__, **(root.get("analysis") or {})}
    return Settings(float(hist["alert_ratio"]), float(hist["step_threshold"]), float(analysis["alpha"]),
                    float(analysis["min_effect"]), int(hist["window"]))


def alerts(store: Path, runs: Optional[Iterable[str]] = None, settings: Settings = Settings(),
           machine: Optional[str] = None, sweep: Optional[str] = None) -> List[Alert]:
    """The cells that regressed: of the given run ids, or of each series' latest night. The
    overnight suite calls this for its exit code; the morning report, the Prometheus exporter and
    the sweep-end publisher read the same list."""
    frame = read(Path(store), machine, sweep)
    if frame.empty:
        return []
    return alerts_of(assess(frame, settings), set(runs) if runs is not None else None)


def record_run(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> Optional[Recorded]:
    """Appends an analysed run (RunData, Analysis) to the store of its root config and returns
    its regressions; None where the history is off. A run with no ok trial is not appended
    (the Recorded's line says so) and has no alerts."""
    from sweeper.history.store import Appended, append_rows, machines_refused, rows_of_run

    if not enabled(root) or not data.records or analysis is None:
        return None
    store = history_dir(root)
    mixed = machines_refused(data.records, bool((root.get("history") or {}).get("mix_machines")))
    if mixed:
        return Recorded(store, (), Appended(store, reason=mixed).line())
    rows = rows_of_run(run, data, analysis)
    done = append_rows(store, rows)
    if not done.files:
        return Recorded(done.store, (), done.line())
    first = rows.iloc[0]
    found = alerts(store, runs={first["run_id"]}, settings=settings_of(root), machine=first["machine"],
                   sweep=first["sweep"])
    return Recorded(done.store, tuple(found), done.line())


def write_recorded(run: Path, recorded: Recorded, notes: Sequence[str] = ()) -> Path:
    """history_alerts.json beside the run (atomically): the record the overnight suite reads."""
    from sweeper.files import write_json_atomic

    payload = {"store": str(recorded.store), "line": recorded.line, "alerts": [a.to_dict() for a in recorded.alerts],
               "lines": recorded.lines(), "notes": list(notes)}
    return write_json_atomic(Path(run) / ALERTS_FILE, payload, indent=1, sort_keys=False)


def read_recorded(run: Path) -> Optional[Dict[str, Any]]:
    """What write_recorded left beside a run (store, alerts, lines, notes), or None where the
    run was not appended. The one reader of that file: the night's check, in another process."""
    try:
        payload = json.loads((Path(run) / ALERTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    payload.setdefault("alerts", [])
    payload.setdefault("notes", [])
    if "lines" not in payload:          # written before the lines were
        payload["lines"] = [Alert(**a).line() for a in payload["alerts"]]
    return payload
