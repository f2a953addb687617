"""Checks of the machine a sweep starts on, before any trial and with dry_run too: the folders
it will write and what the plan asks of this node. Planning itself stays pure (sweeper/plan.py);
these read the file system and the CPU count, and write nothing.

Each problem is one line naming the key: an error (ConfigError, exit 2) when the run could not
do what it was asked, a warning on stderr when it can but the figures would mislead.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, Trial
from sweeper.schema import RootConfig


def check_machine(root: RootConfig, trials: Sequence[Trial], shape: ClusterShape) -> None:
    """Every check of this machine; raises the first error, prints the warnings."""
    check_history_dir(root)
    if root.executor == "local" or not root.ray.address:      # the trials run on this machine
        line = loader_workers_line(trials, shape)
        if line:
            print(f"warning: {line}", file=sys.stderr)


def folder_problem(path: Path) -> Optional[str]:
    """Why `path` cannot be (or become) a folder this user writes, or None. Creates nothing."""
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a folder"
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} (above {path}) is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written by this user"
    return None


def check_history_dir(root: RootConfig) -> None:
    """A history.dir the user gave can take this run's rows: found now, not after the last
    trial, when the run's history could only be lost. (The default store lies inside
    results_dir, which the run folder's own check covers.)"""
    if not root.history.enabled or not root.history.dir:
        return
    problem = folder_problem(Path(root.history.dir).expanduser())
    if problem:
        raise ConfigError(f"history.dir: {problem}; set history.dir= to a folder you can write, "
                          f"or history.enabled=false")


def loader_workers_line(trials: Sequence[Trial], shape: ClusterShape) -> Optional[str]:
    """One line when a trial's loader asks for more worker processes than the largest node has
    CPUs: it runs, but its workers share cores, so it measures contention."""
    cpus = max(shape.node_cpus, default=0.0)
    over: List[int] = sorted({t.config.data.num_workers for t in trials
                              if t.config.data is not None and t.config.data.num_workers > cpus})
    if not over or cpus <= 0:
        return None
    values = ",".join(str(n) for n in over)
    return (f"data.num_workers={values}: more loader workers than this node's {cpus:g} CPUs; they will share "
            f"cores and measure contention (use at most {cpus:g} here, or run on a larger node)")
