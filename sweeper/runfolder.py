"""The run folder: where a sweep's results go, a new one or an earlier one to resume."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, List

from sweeper.errors import SweeperError
from sweeper.plan import Trial
from sweeper.record import TrialRecord
from sweeper.results import read_records, run_dir
from sweeper.schema import RootConfig


def resolve_run(root: RootConfig, fresh: Path) -> Path:
    """The run folder: a new one, or with `resume=` an earlier one (the fresh, empty one goes)."""
    if not root.resume:
        return run_dir(root.results_dir, root.sweep.name, root.run_id)
    runs = Path(root.results_dir).expanduser() / root.sweep.name
    if root.resume == "latest":
        earlier = sorted(p for p in runs.iterdir() if (p / "trials").is_dir()) if runs.is_dir() else []
        if not earlier:
            raise SweeperError(f"resume=latest: no earlier run of sweep '{root.sweep.name}' under {runs}")
        run = earlier[-1]
    else:
        run = runs / root.resume
        if not (run / "trials").is_dir():
            raise SweeperError(f"resume={root.resume}: no run folder with trials at {run}")
    if fresh.resolve() != run.resolve():
        drop_if_empty(fresh)
    root.run_id = run.name
    return run


def drop_if_empty(fresh: Path) -> None:
    """Bad input ran nothing: leave no run folder that holds only Hydra's multirun.yaml."""
    if fresh.is_dir() and set(os.listdir(fresh)) <= {"multirun.yaml"}:
        shutil.rmtree(fresh)


def earlier_results(run: Path, trials: List[Trial]) -> Dict[str, TrialRecord]:
    """Finished trials of this grid from an earlier attempt at the run; leftovers of
    half-written folders are removed so those trials run again."""
    for leftover in (run / "trials").glob(".*"):
        shutil.rmtree(leftover, ignore_errors=True)
    wanted = {t.trial_id for t in trials}
    return {r["trial_id"]: TrialRecord.from_dict(r) for r in read_records(run)
            if r["trial_id"] in wanted and r["status"] == "ok"}
