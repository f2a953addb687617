"""Wall-clock marks of a sweep's phases across its processes: where a short sweep's seconds go.

Off unless SWEEPER_TIMELINE names a file. Each mark appends one line, `<unix time> <pid> <name>`,
with one write to a file opened for appending (lines from the driver, the zygote and the trials
do not interleave). benchmarks/startup.py sets it for each command it times and reads the marks
back against the command's own start; docs/performance.md lists the marks.
"""
from __future__ import annotations

import os
import time

VARIABLE = "SWEEPER_TIMELINE"


def mark(name: str, pid: int = 0) -> None:
    """`pid`: the process the mark is of, where another (its parent) writes it; default this one."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:              # a benchmark's aid: never a reason for a sweep to fail
        return
    try:
        os.write(fd, f"{time.time():.6f} {pid or os.getpid()} {name}\n".encode())
    finally:
        os.close(fd)


def read(path: str) -> list:
    """[(unix time, pid, name)] in the order written; [] when there is no such file."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) == 3:
            out.append((float(parts[0]), int(parts[1]), parts[2]))
    return out
