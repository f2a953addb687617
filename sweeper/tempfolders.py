"""A sweep's folders in the system's temp folder (its trials' scratch, the node zygote's socket and
log): held while the process that made them runs, and removed by a later sweep once nobody does.

A driver that is SIGKILLed (the OOM killer, `kill -9`, a lost login session) cannot remove its own.
Each is small (a socket, a log, the scratch of the trials that were running), but a machine that runs
sweeps every night would collect them. So each holds an flock on itself, taken by the process that
made it (the kernel lets go when that process ends, however it ends), and a marker written once the
lock is held: `clear_abandoned` removes the folders with the marker that nobody holds. One without the
marker (made by an older sweeper, or being made this instant) is left alone, as is everything where
flock does not work.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional

from sweeper.folderlock import TAKEN, lock_folder

PREFIXES = ("sweeper-scratch-", "sweeper-node-")
MARKER = ".held-by-its-sweep"
_HELD: Dict[str, int] = {}       # folder -> the open descriptor that holds its lock


def held_folder(prefix: str) -> Path:
    """A new folder in the temp folder, held by this process until `remove`."""
    path = tempfile.mkdtemp(prefix=prefix)
    fd, state = lock_folder(path)
    if state != TAKEN:               # no flock on this filesystem: never taken for abandoned either
        os.close(fd)
        return Path(path)
    _HELD[path] = fd
    Path(path, MARKER).touch()
    return Path(path)


def remove(path: Path) -> None:
    """The folder and what is in it, and this process's hold on it."""
    shutil.rmtree(path, ignore_errors=True)
    fd = _HELD.pop(str(path), None)
    if fd is not None:
        os.close(fd)


def clear_abandoned(root: Optional[str] = None) -> int:
    """Removes the held folders under `root` (the temp folder) whose process has ended; how many."""
    root = root or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIXES)]
    except OSError:
        return 0
    return sum(_remove_if_abandoned(os.path.join(root, name)) for name in names)


def _remove_if_abandoned(path: str) -> bool:
    if path in _HELD or not os.path.isfile(os.path.join(path, MARKER)):
        return False
    try:
        fd, state = lock_folder(path)
    except OSError:                  # gone meanwhile, or not ours to open
        return False
    try:
        if state == TAKEN:           # else its sweep is running
            shutil.rmtree(path, ignore_errors=True)
        return state == TAKEN
    finally:
        os.close(fd)
