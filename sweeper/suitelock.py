"""The overnight suite's lock: one suite at a time per lock file (fcntl.flock on
overnight.lock_file). The kernel lets go of a flock when its holder ends, however it ends; the
holder writes who it is into the file, which is what a second start prints (docs/overnight.md)."""
from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from sweeper.errors import ConfigError


class LockHeld(Exception):
    """Another suite holds the lock; the message names it."""


def take_lock(path: Path, holder: Dict[str, Any]):
    """An open file holding an exclusive flock, with `holder` written into it; raises
    LockHeld naming the current holder. Keep the file open for as long as the lock is held;
    release_lock removes the file, so a lock file outlives no suite."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read()
            handle.close()
            raise LockHeld(f"another overnight suite holds {path}: {describe_holder(text)}") from None
        if _same_file(handle, path):       # not a file its last holder removed as we opened it
            break
        handle.close()
    handle.seek(0)
    if not _lock_text(handle.read()):
        handle.close()
        raise ConfigError(f"overnight.lock_file: {path} holds something other than a suite's lock; "
                          f"give the lock a path of its own")
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(holder))
    handle.flush()
    return handle


def check_lock_path(path: Path) -> None:
    """overnight.lock_file can be a lock: a file this user can create or open, not a folder."""
    from sweeper.preflight import folder_problem

    problem = (f"{path} is a folder" if path.is_dir() else
               f"{path} is not a regular file" if path.exists() and not path.is_file() else folder_problem(path.parent))
    if problem:
        raise ConfigError(f"overnight.lock_file: {problem}; give the lock a file path of its own "
                          f"(default ~/.cache/sweeper/overnight.lock)")


def _lock_text(text: str) -> bool:
    """Empty (a new lock) or what a suite writes into one (left by a suite that was killed)."""
    if not text:
        return True
    try:
        return {"pid", "host"} <= set(json.loads(text))
    except (ValueError, TypeError):
        return False


def _same_file(handle, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def release_lock(handle, path: Path) -> None:
    """Removes the lock file while still holding it, then lets go: a suite that opened the old
    file meanwhile sees it is gone (take_lock's check) and takes a new one."""
    if _same_file(handle, path):
        path.unlink()
    handle.close()


def describe_holder(text: str) -> str:
    try:
        h = json.loads(text)
        return (f"pid {h['pid']} on {h['host']}, started {h['started']} ({h['command']})")
    except (ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"


def holder_info(started: float) -> Dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "command": shlex.join([*_program(), *sys.argv[1:]])}


def _program() -> List[str]:
    """How this process was started, as a person would type it."""
    first = Path(sys.argv[0])
    if first.name == "__main__.py":          # python -m <package>
        return ["python", "-m", first.parent.name]
    return [first.name]
