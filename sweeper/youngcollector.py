"""Python's cyclic garbage collector while a command starts.

Importing torch leaves some 265,000 more objects than it found (torch 2.13, CPU build), Hydra,
pandas and the driver more, nearly all of them living as long as the process. With Python's
default threshold (a young collection every 700 new objects) the collector walks them again and
again as they are made: 0.1-0.15 s of `import torch`'s 0.9-1.0 s on a 2-core VM (`benchmarks/startup.py`'s rows and docs/performance.md give the whole commands). A young
generation of 50,000 objects keeps most of that gain, where turning the collector off would keep
all of it but let a composed grid's cyclic garbage (OmegaConf nodes point at their parents) grow
without bound.

The command widens it as it starts (sweeper/__main__.py), and the node zygote for its imports
(sweeper/_zygote.py). A workload runs under the thresholds its process started with: the trial
restores them just before it (sweeper/trial.py), in the command's own process (executor=local)
and in a trial forked from the zygote alike, so measured steps see a plain interpreter's collector.
The driver keeps the wide young generation for its life: its memory stays bounded by it.
"""
from __future__ import annotations

import gc
from typing import Optional, Tuple

YOUNG_AT_START = 50_000
_saved: Optional[Tuple[int, ...]] = None


def widen_for_start() -> None:
    """A young generation of YOUNG_AT_START objects until `restore`; a second call changes nothing."""
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        gc.set_threshold(max(YOUNG_AT_START, _saved[0]), *_saved[1:])


def restore() -> None:
    """The thresholds as they were before `widen_for_start`; nothing where it was not called."""
    global _saved
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None
