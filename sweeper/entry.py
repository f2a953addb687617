"""What `python -m sweeper` runs once Hydra has composed the jobs: a suite of sweeps
(overnight.sweeps, +sweep=overnight: sweeper/overnight.py) or one sweep (sweeper/driver.py).
The suite runs sweeps as processes of their own; a sweep knows no suite."""
from __future__ import annotations

import sys
from typing import List, Optional

from sweeper import exitcodes
from sweeper.sweep import Job


OTHER_LAUNCHER = ("hydra/launcher: only the sweeper launcher runs sweeps; for trials inside this process "
                  "(a debugger, a profiler) use executor=local")


def refuse_other_launcher() -> None:
    """The one line and exit code for a sweep handed to another launcher than sweeper's."""
    print(f"error: {OTHER_LAUNCHER}", file=sys.stderr)
    exitcodes.report(exitcodes.USAGE)


def run_jobs(jobs: List[Job], multirun: Optional[str] = None) -> int:
    """Runs the composed jobs; returns the exit code (sweeper.exitcodes). `multirun`: the
    text of multirun.yaml (what Hydra launched), written into the run folder once it exists."""
    if not (jobs and jobs[0].config.overnight.sweeps):
        from sweeper.driver import run_sweep

        return run_sweep(jobs, multirun)
    if len(jobs) > 1:
        print(f"error: overnight.sweeps: a suite takes single values on its command line, not a grid "
              f"({len(jobs)} jobs); put the axes into a sweep's file (conf/sweep/NAME.yaml)", file=sys.stderr)
        return exitcodes.USAGE
    from sweeper.overnight import run_suite

    return run_suite(jobs[0], multirun)
