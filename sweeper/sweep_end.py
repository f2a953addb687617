"""The end of a sweep: one analysis of the run, handed to every view."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import exitcodes
from sweeper.schema import RootConfig

if TYPE_CHECKING:
    from sweeper.sweep import Sweep


def publish_end(sweep: "Sweep", root: RootConfig, run: Path) -> int:
    """One analysis of the run; every view reads it. Returns the exit code of the trials."""
    from sweeper import publishers
    from sweeper.analysis.run import analyze_run
    from sweeper.record import as_dicts

    records = as_dicts(sweep.records.values())
    values = sweep.jobs[0].values
    print()
    if records:
        data, analysis = analyze_run(run, root.analysis, records=records, cost=root.cost)
        publishers.on_sweep_end(run, data, analysis, values)
        print(publishers.terminal_end(data, analysis, values, run))
    failed = any(r["status"] != "ok" for r in records)
    return exitcodes.TRIALS_FAILED if failed else exitcodes.OK
