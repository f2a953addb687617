"""The history's side of the overnight suite: the regression check it calls when a night ends.

    # conf/sweep/overnight.yaml
    overnight:
      alerts: sweeper.history.overnight:night_end

`night_end(night, manifest)` returns the night's alerts as dicts (any alert: the suite exits 3)
and writes the morning report, <night>/morning.html. The alerts are the ones each sweep's
end computed against the history store it appended to (history_alerts.json in its run
folder), so the check and the sweeps read one store, whatever history.dir said.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List

log = logging.getLogger(__name__)
MORNING = "morning.html"


def night_runs(night: Path, manifest: Dict[str, Any]) -> List[Path]:
    """The run folders of the sweeps the night ran (<night>/<sweep>/<stamp>)."""
    return [Path(night) / s["run"] for s in manifest.get("sweeps", []) if s.get("run")
            and (Path(night) / s["run"] / "trials").is_dir()]


def _written(run: Path) -> Dict[str, Any]:
    from sweeper.publishers.history_sink import read_alerts

    return read_alerts(run) or {}


def store_of(night: Path, manifest: Dict[str, Any]) -> Path:
    """The store the night's sweeps appended to (what they wrote down), else the night's default."""
    from sweeper.history import night_store

    for run in night_runs(night, manifest):
        if _written(run).get("store"):
            return Path(_written(run)["store"])
    return night_store(Path(night))


def night_end(night: Path, manifest: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The night's regressions (dicts of sweeper.history.Alert), and morning.html in the night folder."""
    night = Path(night)
    alerts = [a for run in night_runs(night, manifest) for a in _written(run).get("alerts", [])]
    try:
        from sweeper.history.morning import write_morning

        path = write_morning(store_of(night, manifest), night / MORNING, night=night, manifest=manifest)
        print(f"morning report: {path}", flush=True)
    except Exception as exc:          # the report is never worth the night's exit code
        log.warning("morning report failed: %s: %s", type(exc).__name__, exc)
        print(f"warning: morning report failed: {type(exc).__name__}: {exc}", flush=True)
    return alerts
