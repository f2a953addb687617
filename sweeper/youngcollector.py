"""Python's cyclic garbage collector while a command starts.

Importing torch leaves some 265,000 more objects than it found (torch 2.13, CPU build), Hydra,
pandas and the driver more, nearly all of them living as long as the process. With Python's
default threshold (a young collection every 700 new objects) the collector walks them again and
again as they are made: about 0.1 s of `import torch`'s 1 s on a 2-core VM (docs/performance.md
gives the whole commands, measured with benchmarks/ab_checkouts.py). A young generation of
50,000 objects keeps most of that gain, where turning the collector off would keep
all of it but let a composed grid's cyclic garbage (OmegaConf nodes point at their parents) grow
without bound.

The command widens it as it starts (sweeper/__main__.py, where it runs as `python -m sweeper`), and
every zygote for its imports (sweeper/_zygote.py). A workload's module is imported so; its call runs
under the thresholds the process started with, which the trial puts back just before it
(sweeper/trial.py), in the command's own process (executor=local: from its first trial on, for the
rest of the command) and in a trial forked from a zygote alike. The driver of a Ray sweep puts
them back once Ray is up and its own imports are done (sweeper/driver.py): Ray's handles in cyclic
garbage must be collected while Ray runs, since one freed after Ray's shutdown ends the process
at once, before the table (Ray's "core worker has already been shutdown", exit 1).
"""
from __future__ import annotations

import gc
from typing import Optional, Tuple

YOUNG_AT_START = 50_000
_original: Optional[Tuple[int, ...]] = None     # the thresholds before the first widening


def widen_for_start() -> None:
    """A young generation of YOUNG_AT_START objects until `restore`; once a process's first call has
    run, later calls change nothing."""
    global _original
    if _original is None:
        _original = gc.get_threshold()
        gc.set_threshold(max(YOUNG_AT_START, _original[0]), *_original[1:])


def restore() -> None:
    """The thresholds as they were before `widen_for_start`, again at every call (a trial before this
    one in the same process may have set its own); nothing where it was never called."""
    if _original is not None:
        gc.set_threshold(*_original)
