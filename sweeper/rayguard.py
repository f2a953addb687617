"""The local Ray cluster ends with its driver, however the driver ends.

A driver killed with SIGKILL leaves Ray's agents running. `guard_local_ray` starts a
watchdog (`python -m sweeper.rayguard`) in a session of its own that ends that Ray
session's processes when the driver dies. This module imports no Ray.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import List, Optional, Sequence

import psutil

from sweeper.containment import kill_procs, running

def drop_session(session_dir: str) -> None:
    """Removes the folder of a local Ray session whose processes have ended, and Ray's
    `session_latest` link where it names that folder: Ray keeps every session's folder (its
    logs and sockets, 0.2-2 MB), so a machine that runs sweeps every night would collect them."""
    import shutil

    shutil.rmtree(session_dir, ignore_errors=True)
    latest = os.path.join(os.path.dirname(session_dir), "session_latest")
    with contextlib.suppress(OSError):
        if os.path.realpath(latest) == os.path.realpath(session_dir):
            os.unlink(latest)


class RayGuard:
    """The watchdog of one local Ray session; `close()` after a normal `ray.shutdown()`."""

    def __init__(self, proc: Optional[subprocess.Popen]) -> None:
        self.proc = proc

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()              # the watchdog takes SIGTERM as "stand down"
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _identity(proc: psutil.Process) -> List:
    return [proc.pid, proc.create_time()]


def guard_session(session_dir: Optional[str]) -> RayGuard:
    """Starts the watchdog for this process (the driver) and what it started so far."""
    me = psutil.Process()
    known = []
    for child in me.children(recursive=True):
        try:
            known.append(_identity(child))
        except psutil.Error:
            pass
    args = {"driver": _identity(me), "session_dir": session_dir, "pids": known}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen([sys.executable, "-m", "sweeper.rayguard", json.dumps(args)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)       # a Ctrl-C or a killpg of the driver spares it
    return RayGuard(proc)


def guard_local_ray(session_dir: Optional[str]) -> RayGuard:
    """Call right after `ray.init()` started a LOCAL cluster, with its session folder (the Ray
    executor finds it: this module imports no Ray); `close()` after `ray.shutdown()`."""
    return guard_session(session_dir)


def _same(pid: int, created: float) -> Optional[psutil.Process]:
    try:
        proc = psutil.Process(pid)
        return proc if abs(proc.create_time() - created) < 0.01 else None
    except psutil.Error:
        return None


def _of_session(proc: psutil.Process, session_dir: str) -> bool:
    """Ray's daemons name the session folder on their command line; its workers and agents
    (retitled `ray::...`) keep their logs open in it."""
    inside = session_dir.rstrip(os.sep) + os.sep        # not a session whose name merely starts alike
    try:
        cmdline = proc.cmdline()
        if any(inside in arg or arg.endswith(session_dir) for arg in cmdline):
            return True
        if cmdline and cmdline[0].startswith("ray::"):
            return any(f.path.startswith(inside) for f in proc.open_files())
    except psutil.Error:
        pass
    return False


def session_processes(session_dir: Optional[str], known: Sequence[Sequence[float]]) -> List[psutil.Process]:
    """The processes of one Ray session still running, with everything below them."""
    me = os.getpid()
    found = {p.pid: p for p in (_same(int(pid), created) for pid, created in known) if p is not None}
    if session_dir:
        for proc in psutil.process_iter():
            if proc.pid != me and proc.pid not in found and _of_session(proc, session_dir):
                found[proc.pid] = proc
    for proc in list(found.values()):
        try:
            found.update({c.pid: c for c in proc.children(recursive=True) if c.pid != me})
        except psutil.Error:
            pass
    return [p for p in found.values() if p.pid != me and running(p)]


def _wait_for_death(pid: int, created: float) -> None:
    """Returns when the driver has gone (a pidfd becomes readable; polling where there is none)."""
    import select

    if _same(pid, created) is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        while _same(pid, created) is not None:
            time.sleep(0.5)
        return
    if _same(pid, created) is not None:      # the pidfd is the driver's, not a reused pid's
        select.select([fd], [], [])
    os.close(fd)


def watchdog(args: dict) -> None:
    """Waits for the driver to die, then SIGKILLs its Ray session until nothing of it is left, and
    removes what the driver would have removed at its end: the session's folder, and its own
    folders in the temp folder (sweeper/tempfolders.py)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))   # RayGuard.close(): stand down
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _wait_for_death(*args["driver"])
    end = time.monotonic() + 30
    while time.monotonic() < end:
        left = session_processes(args["session_dir"], args["pids"])
        if not left:
            _drop_leftovers(args["session_dir"])
            return
        kill_procs(left)
        time.sleep(0.2)


def _drop_leftovers(session_dir: Optional[str]) -> None:
    from sweeper.tempfolders import clear_abandoned

    if session_dir:
        drop_session(session_dir)
    clear_abandoned()


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].startswith("{"):      # typed by hand, not started by a driver
        print("error: sweeper.rayguard is the watchdog a sweep starts for its own Ray, not a command; "
              "run python -m sweeper --help", file=sys.stderr)
        sys.exit(2)
    watchdog(json.loads(sys.argv[1]))
