"""The end of a sweep: one analysis of the records the driver holds, the history, every view."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweeper import exitcodes
from sweeper.schema import RootConfig

if TYPE_CHECKING:
    from sweeper.sweep import Sweep


def publish_end(sweep: "Sweep", root: RootConfig, run: Path) -> int:
    """Hands the records held in memory to sweeper.publishers.end_of_sweep (one Analysis, the
    history's alerts, every view) and prints the terminal's text. Returns the exit code of the trials."""
    from sweeper import publishers
    from sweeper.record import as_dicts

    records = as_dicts(sweep.records.values())
    print()
    if records:
        print(publishers.end_of_sweep(run, records, sweep.jobs[0].values, root.analysis, root.cost))
    failed = any(r["status"] != "ok" for r in records)
    return exitcodes.TRIALS_FAILED if failed else exitcodes.OK
