"""Where a run's history store is: the one rule, in a module that imports nothing heavy, so the
checks before any trial (sweeper/preflight.py, dry runs too) read it without pandas."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

NIGHT_MANIFEST = "night.json"     # an overnight suite's night folder holds it (sweeper/overnight.py)


def default_dir(results_dir: str) -> Path:
    """<results_dir>/history: beside the runs it indexes (see docs/history.md)."""
    return Path(results_dir).expanduser() / "history"


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
