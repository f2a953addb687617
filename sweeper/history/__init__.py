"""History across nights: every finished run appended to a store, trends, and regression alerts.

    from sweeper import history
    found = history.alerts("results/history")            # [Alert]: each cell series' latest night
    found = history.alerts("results/history", runs={"20261201-020000"})

`python -m sweeper.history` lists runs, shows trends and the differences between two nights,
appends old runs and writes the morning report (docs/history.md). Imports no Ray, torch or W&B.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from sweeper.history.detect import Alert, Settings, alerts_of, assess
from sweeper.history.store import append_run, default_dir, read

__all__ = ["Alert", "Settings", "alerts", "append_run", "assess", "default_dir", "history_dir", "read",
           "settings_of"]


NIGHT_MANIFEST = "night.json"     # an overnight suite's night folder holds it (sweeper/overnight.py)


def history_dir(root: Dict[str, Any]) -> Path:
    """The store of a root config (a resolved dict): history.dir, else <results_dir>/history; when
    results_dir is an overnight suite's night folder (results/overnight/<stamp>, with night.json),
    the suite's own results folder's store (results/history), so every night and every ordinary
    sweep under results/ append to one."""
    configured = (root.get("history") or {}).get("dir")
    if configured:
        return Path(configured).expanduser()
    results = Path(root.get("results_dir") or "results").expanduser()
    return night_store(results) if (results / NIGHT_MANIFEST).exists() else default_dir(str(results))


def night_store(night: Path) -> Path:
    """The default store of a night folder <results>/overnight/<stamp>: <results>/history."""
    return default_dir(str(Path(night).parent.parent))


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
