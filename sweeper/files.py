"""Atomic writes: a reader sees the whole old file or the whole new one, never half of either.

Every file of a run folder, the history store's manifests and a night folder is written
through here: to a dotted temporary name beside it (same file system, and readers skip dot
names), then `os.replace`. A folder is built under a staging name and swapped in the same way.
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import stat
import sys
import uuid
from pathlib import Path
from typing import Any, Callable


def _temporary(path: Path) -> Path:
    if not path.name:           # '.', '/': a folder (with_name would raise ValueError, read as a bug)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


def write_with(path: Path, write: Callable[[Path], Any]) -> Path:
    """Calls `write(tmp)` (a library that writes to a path: parquet, a CSV) and renames tmp to
    `path`; a failed write leaves `path` as it was and no temporary behind."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is not None and Path(exc.filename) == tmp:    # the user named `path`, not our temporary
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    return write_with(path, lambda tmp: tmp.write_bytes(data))


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode())


# A path that names one of this process's own open files: written to that descriptor, as a shell
# redirection set it up (`>> log` appends), not reopened at offset 0 or renamed over.
OWN_FD = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
STD_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}


def write_named_file(path: Path, text: str) -> Path:
    """A file a user named on the command line (--out, --json). /dev/stdout, /dev/stderr and
    /dev/fd/N are written to that descriptor; another stream (a FIFO, a device, anything under
    /dev or /proc) is written in place, since renaming a temporary over it would replace the pipe
    or device itself; a symlink to a file is written through; anything else atomically."""
    path = Path(path)
    absolute = os.path.abspath(path)
    found = OWN_FD.fullmatch(absolute)
    fd = STD_STREAMS.get(absolute, int(found.group(1)) if found else None)
    if fd is not None:
        sys.stdout.flush()                      # what was printed before stays before it
        with os.fdopen(os.dup(fd), "w") as stream:
            stream.write(text)
        return path
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    stream_there = mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)
    if stream_there or absolute.startswith(("/dev/", "/proc/")):
        # O_NONBLOCK: a FIFO nobody reads is ENXIO (one line), not a hang; the writes then block.
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
        return path
    return write_text_atomic(Path(os.path.realpath(path)) if path.is_symlink() else path, text)


def finite(value: Any) -> Any:
    """JSON has no NaN: None instead (null), at any depth, so other tools can read the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(value: Any, indent: int = 2, sort_keys: bool = True) -> str:
    """JSON of `value`: NaN as null, anything json cannot write as its str."""
    return json.dumps(finite(value), indent=indent, sort_keys=sort_keys, default=str)


def write_json_atomic(path: Path, value: Any, indent: int = 2, sort_keys: bool = True) -> Path:
    return write_text_atomic(path, json_text(value, indent, sort_keys))


def replace_dir(staging: Path, final: Path) -> Path:
    """Swaps a fully written folder into place, replacing any earlier one of that name."""
    if not final.exists():
        os.replace(staging, final)
        return final
    old = final.parent / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
    os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)
    return final
