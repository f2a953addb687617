"""Executors: where and how trials run. The driver talks to one through `Executor` (base.py).

- `ray` (default, sweeper/executors/ray_executor.py, the only module that imports Ray):
  each trial a Ray task, forked from a warm zygote into a contained process of its own.
- `local` (sweeper/executors/local.py): trials one at a time inside the driver's own
  process, so a debugger's breakpoint or a profiler sees the workload.

To add one: subclass `Executor`, give it a name in `make_executor`, add the name to
`schema.EXECUTORS`. Both shipped executors feed the same driver, so the summary, tables,
exit codes and publishers are the same whichever ran the trials.
"""
from __future__ import annotations

from typing import Sequence

from sweeper.executors.base import Executor, TrialLost

__all__ = ["Executor", "TrialLost", "make_executor"]


def make_executor(root, preload: Sequence[str]) -> Executor:
    if root.executor == "local":
        from sweeper.executors.local import LocalExecutor

        return LocalExecutor()
    from sweeper.executors.ray_executor import RayExecutor

    return RayExecutor(root.ray, preload)
