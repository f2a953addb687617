"""The node zygote: the one the driver starts on its own machine for a local Ray's workers, and
the spare started at the command's start.

The spare: when the command line may run a sweep on a local Ray (sweeper/headstart.py),
sweeper/__main__.py starts one before Hydra composes, so that its imports (torch: seconds) overlap
the composing; the Ray executor adopts it (`adopt`) instead of starting its own. Every path that
does not (a config error, a dry run, executor=local or a suite set in a file, an attached cluster,
an interrupt) ends it (`end_spare`): where that is known, at the launcher's head start's end, at
the command's end, and at exit. It is started from the main thread, so Linux's SIGKILL on its
parent's death (PR_SET_PDEATHSIG, sweeper/_zygote.py) comes only with the driver's own death.

Starting a zygote and reaching its socket (`start_zygote`, `connect_zygote`, `preload_more`) live
here too, for every host (sweeper/isolation.py): this module imports only the standard library and
two small modules of sweeper's, so that the command can start its spare before it imports Hydra.
"""
from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import time
from typing import Optional, Sequence

from sweeper.tempfolders import held_folder, remove
from sweeper.timeline import mark

PARENT_PID = "SWEEPER_ZYGOTE_PARENT"    # who started it: a zygote whose parent died before it asked for SIGKILL exits
_SPARE: Optional["NodeZygote"] = None          # started by start_spare, not yet adopted or ended


def socket_address(path: str) -> str:
    """A Unix socket path, or "@name" for Linux's abstract namespace (argv cannot carry its NUL)."""
    return "\0" + path[1:] if path.startswith("@") else path


def connect_zygote(socket_path: str, wait_s: float = 10.0) -> socket.socket:
    """The zygote binds its socket within milliseconds of starting; wait that long at most."""
    deadline = time.monotonic() + wait_s
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(socket_address(socket_path))
            return conn
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def preload_more(socket_path: str, modules: Sequence[str]) -> None:
    """Asks a running zygote to import `modules` too before it forks the next trial."""
    if modules:
        with connect_zygote(socket_path) as conn:
            conn.sendall((json.dumps({"preload": list(modules)}) + "\n").encode())


def ask_standby(socket_path: str, request: dict) -> None:
    """Asks a running zygote for a standby trial process for `request`'s environment
    (sweeper/standby.py), which the first trial of that environment then takes."""
    with connect_zygote(socket_path) as conn:
        conn.sendall((json.dumps({"standby": request}) + "\n").encode())


def start_zygote(socket_path: str, preload: Sequence[str] = (), stdout=subprocess.DEVNULL,
                 stderr=None) -> subprocess.Popen:
    """A zygote listening at `socket_path`; it imports what this process can (a user's
    workload module next to the driver too)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), PARENT_PID: str(os.getpid())}
    return subprocess.Popen([sys.executable, "-m", "sweeper._zygote", socket_path, *preload], env=env,
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)


class NodeZygote:
    """A zygote the driver starts on its own machine while Ray starts, so that its torch
    import overlaps Ray's start instead of following it. The local Ray's workers fork
    their trials from it; workers on other machines (no such socket there) use their own."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.folder = held_folder("sweeper-node-")
        self.socket_path = str(self.folder / "zygote.sock")
        self.log = None
        try:
            self.log = open(self.folder / "zygote.log", "wb")
            self.proc = start_zygote(self.socket_path, preload, stderr=self.log)
        except BaseException:              # no zygote (out of processes, memory): nor its log and folder
            if self.log is not None:
                self.log.close()
            remove(self.folder)
            raise
        mark("zygote_started", pid=self.proc.pid)

    def preload(self, modules: Sequence[str]) -> None:
        try:
            preload_more(self.socket_path, modules)
        except OSError:              # not listening (yet): each trial then imports them itself
            pass

    def standby(self, request: dict) -> None:
        try:
            ask_standby(self.socket_path, request)
        except OSError:              # not listening: the first trial starts cold
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to it and to every process below it (the trials' keepers, the trials and what
        they started, which it adopts as a subreaper), returning once each has exited: nothing
        there holds anything to save. Each would end by its death signal anyway, but only after its
        parent had, and a driver that returned at once could leave a trial still exiting behind it
        (a sweep whose raylet was SIGKILLed, in a full test run on 2 cores)."""
        if self.alive():
            from sweeper.containment import end_processes, process_trees

            end_processes(process_trees([self.proc.pid]))

    def close(self) -> None:
        self.kill()
        self.proc.wait(timeout=10)
        self.log.close()
        remove(self.folder)


def start_spare() -> None:
    """Starts the spare; call it from the main thread (its death signal follows the thread). None
    where the temp folder lacks the room a sweep needs: the check before Ray's start says so in one
    line, and the spare's folder and log would have taken from that room first."""
    global _SPARE
    if _SPARE is None and _room_for_a_sweep():
        try:
            _SPARE = NodeZygote(())
        except OSError:              # the temp folder refused it: the checks that follow say why
            _SPARE = None


def _room_for_a_sweep() -> bool:
    """preflight's rule for a local Ray's temp folders, asked before the configs say more."""
    from sweeper.errors import SweeperError
    from sweeper.preflight import check_temp_room

    try:
        check_temp_room("ray", None)
    except SweeperError:         # no room, or too deep for its socket: the checks that follow say so
        return False
    return True


def adopt(preload: Sequence[str]) -> NodeZygote:
    """The spare, if it is alive, told to import `preload` too; else a zygote of its own."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    if spare is not None and spare.alive():
        if preload:
            spare.preload(preload)
        return spare
    if spare is not None:
        spare.close()
    return NodeZygote(preload)


def end_spare() -> None:
    """Ends the spare, if one is left: nothing will fork trials from it."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    if spare is not None:
        spare.close()


atexit.register(end_spare)      # the last resort: a spare that no scope ended (a caller of start_spare of its own)
