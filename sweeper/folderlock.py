"""An exclusive flock on a folder itself: nothing is written into the folder for it, and the kernel
lets go when the holding process ends, however it ends (SIGKILL too). A run folder is held so while
a sweep writes it (sweeper/runfolder.py), and a sweep's temp folders for as long as it runs
(sweeper/tempfolders.py).
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Tuple, Union

TAKEN, BUSY, NO_FLOCK = "taken", "busy", "no flock"


def lock_folder(path: Union[str, Path]) -> Tuple[int, str]:
    """An open descriptor of the folder `path` (closing it lets go) and whether its lock was TAKEN,
    is held by another process (BUSY), or cannot be had on this filesystem (NO_FLOCK). Raises
    OSError where the folder cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd, BUSY
    except OSError:
        return fd, NO_FLOCK
    return fd, TAKEN


def holder(fd: int) -> str:
    """'pid N' of the process holding an flock on the file `fd` is open on, from /proc/locks."""
    inode = str(os.fstat(fd).st_ino)
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "its pid unknown"
    for fields in (line.split() for line in lines):
        if len(fields) > 5 and "->" not in fields and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == inode:
            return f"pid {fields[4]}"
    return "its pid unknown"
