"""The zygote: a single-threaded process that has imported torch once and forks
one fresh child per trial.

A fresh interpreter that imports torch costs seconds; a fork of one that already
has costs milliseconds, and the child still shares nothing with the last trial
(it is a new process, copy-on-write from a parent that never ran a trial).
CUDA is never initialised here, so each child can start it for its own GPUs.

    python -m sweeper._zygote <socket path, or @name for an abstract socket>

It listens on a Unix socket before it imports anything, so hosts can connect while
it warms up; it writes {"ready": pid} on stdout once its imports are done. One
connection is one trial, one JSON object a line: the host sends {"scratch": dir,
"env": {...}} (or {"preload": [modules]}: import these too before the next fork); the zygote answers {"pid": n} when the child starts and {"pid": n,
"exit": code} when it ends. With "prestart" (sweeper/standby.py) it answers {"pid": n, "exit": 0}
as soon as the trial has written its record, while its process still ends, and with "next" it
forks a standby for the next trial of the same environment, which a later request takes. The child reads its spec from <scratch>/spec.pkl. A host
that hangs up before its trial ends takes the trial (its process group) down with it.
Each child is the trial's keeper (sweeper.containment.keep): it forks the real trial and,
when that ends or on SIGTERM, ends every process below it, new sessions included.
Several hosts (the Ray workers of one node) can share a zygote; trials run side by side.
"""
from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence, Set

from sweeper import containment, youngcollector
from sweeper.nodezygote import PARENT_PID, socket_address
from sweeper.standby import release
from sweeper.zygote_standbys import PARKED_WAIT_S, Standby, StandbyKeeping, send as _send, standby_key
from sweeper.zygote_child import drop_scratch, run_keeper
from sweeper.timeline import mark

STOP_GRACE_S = 5          # a keeper ends its trial's tree in milliseconds; then its group gets SIGKILL

# Imported once here so each trial's fork starts warm; none of them may initialise CUDA.
PRELOAD = ("torch", "numpy", "pandas", "pyarrow", "pyarrow.parquet", "psutil", "sweeper.trial", "sweeper.fingerprint",
           "sweeper.measure.build",     # the core's own; each workload's spec adds its modules (argv)
           # what writing steps.parquet imports on first use: else every child imports them again
           "pyarrow.pandas_compat", "pandas.core.arrays.arrow.extension_types", "pyarrow.vendored.version")


def _import_all(names) -> None:
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:   # a trial that needs it will fail with the real error
            print(f"zygote: could not preload {name}: {exc}", file=sys.stderr)


def _freeze() -> None:
    """Everything imported so far moves to the permanent generation: a trial's garbage
    collections then skip it, so they neither take the time to walk torch's objects nor
    write to their headers, which would copy the zygote's pages one by one into each child
    (Python's docs advise gc.freeze() before fork for this). No collection first: the few cycles
    the imports left are kept, where a full collection over torch's objects held up the first
    trial (0.1 s here, more on a GPU host), which waits for this zygote to be ready."""
    gc.freeze()


def _preload() -> None:
    _import_all(PRELOAD + tuple(sys.argv[2:]))
    try:   # cached here so every child skips `git rev-parse` and the metadata reads (no CUDA is touched)
        from sweeper.fingerprint import git_commit, package_versions

        git_commit()
        package_versions()
    except Exception:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop(pid: int) -> None:
    """Asks a keeper to end its trial and everything the trial started."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


class Zygote(StandbyKeeping):
    """Forks a child per request and reports each child's end on the connection that asked."""

    def __init__(self, listener: socket.socket):
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.buffers: Dict[socket.socket, bytes] = {}
        self.trial_of: Dict[socket.socket, int] = {}     # connection -> its running child
        self.host_of: Dict[int, socket.socket] = {}      # child pid -> the connection that asked
        self.keepers: Set[int] = set()                   # children that are keepers, until reaped
        self.doomed: Dict[int, float] = {}               # keeper -> when its group gets SIGKILL
        self.scratch_of: Dict[int, Path] = {}            # keeper -> its trial's scratch folder
        self.abandoned: Set[int] = set()                 # keepers whose host hung up
        self.reports: Dict[int, int] = {}                # a prestarted trial's report pipe (read end) -> its keeper
        self.standbys: Dict[str, Standby] = {}           # environment -> the standby waiting for its next trial
        self.ready: Set[int] = set()                     # keepers of standbys whose CUDA has started
        self.cold: Set[str] = set()                      # environments whose standby could not start CUDA
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        os.set_blocking(wake_read, False)
        self.wake_read = wake_read
        signal.set_wakeup_fd(wake_write)                 # SIGCHLD wakes the select below
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(wake_read, selectors.EVENT_READ, "child")

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select(self._until_backstop()):
                self._handle(key)
            self._backstop()

    def _handle(self, key: selectors.SelectorKey) -> None:
        if key.data == "accept":
            conn, _ = self.listener.accept()
            self.buffers[conn] = b""
            self.selector.register(conn, selectors.EVENT_READ, "host")
        elif key.data == "child":
            self._reap()
        elif key.data == "report":
            if key.fileobj in self.reports:      # not closed by a reap earlier in this batch
                self._report(key.fileobj)
        else:
            self._read(key.fileobj)

    def _read(self, conn: socket.socket) -> None:
        try:
            chunk = conn.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._hang_up(conn)
            return
        self.buffers[conn] += chunk
        while b"\n" in self.buffers[conn]:
            line, self.buffers[conn] = self.buffers[conn].split(b"\n", 1)
            request = json.loads(line)
            if "preload" in request:     # the workloads' modules, known once the driver has composed the jobs
                self._discard_standbys()     # forked before them: their trials would import them again
                _import_all(request["preload"])
                _freeze()
            elif "standby" in request:   # the first trial's, before it is submitted
                key = standby_key(request["standby"])
                if key not in self.standbys and key not in self.cold:
                    self._fork_standby(key, request["standby"])
            else:
                self._start(conn, request)

    def _start(self, conn: socket.socket, request: dict) -> None:
        standby = self.standbys.get(standby_key(request)) if request.get("prestart") else None
        if standby is None or standby.parked is not None:
            self._run_trial(conn, request)
        elif standby.keeper in self.ready:
            self._run_trial(conn, request, standby)
        else:                            # its CUDA is starting: sooner done than a fresh fork's
            standby.parked, standby.parked_until = (conn, request), time.monotonic() + PARKED_WAIT_S

    def _started(self, conn: socket.socket, request: dict, pid: int, locks: Optional[list] = None) -> None:
        self.scratch_of[pid] = Path(request["scratch"])
        self.trial_of[conn] = pid
        self.host_of[pid] = conn
        _send(conn, {"pid": pid})
        key = standby_key(request)
        self._retire_overlapping(key)
        if locks is not None:
            if key in self.standbys:
                release(locks)
            else:
                self._fork_standby(key, request, locks)

    def _fork(self, request: dict, feed: Optional[int] = None, locks: Sequence[int] = ()) -> int:
        report, report_w = os.pipe() if request.get("prestart") else (None, None)
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._close_in_child()
            if report is not None:
                os.close(report)
            run_keeper(request, zygote, report_w, feed, locks)
        for fd in (report_w, feed, *locks):
            if fd is not None:
                os.close(fd)
        self.keepers.add(pid)
        if report is not None:
            os.set_blocking(report, False)
            self.reports[report] = pid
            self.selector.register(report, selectors.EVENT_READ, "report")
        return pid

    def _close_in_child(self) -> None:
        """What only the zygote may hold: a standby whose request pipe another process also held
        open would never see the zygote close it."""
        self.selector.close()
        self.listener.close()
        for other in list(self.buffers):
            other.close()
        for fd in [*self.reports, *(s.feed for s in self.standbys.values())]:
            try:
                os.close(fd)
            except OSError:
                pass

    def _reap(self) -> None:
        while True:
            try:
                os.read(self.wake_read, 4096)
            except BlockingIOError:
                break
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            self.keepers.discard(pid)
            self.doomed.pop(pid, None)
            self._standby_gone(pid)
            scratch = self.scratch_of.pop(pid, None)
            if pid in self.abandoned and scratch is not None:     # its host hung up: nobody reads it
                drop_scratch(scratch)
            self.abandoned.discard(pid)
            conn = self.host_of.pop(pid, None)
            if conn is not None:
                self.trial_of.pop(conn, None)
                _send(conn, {"pid": pid, "exit": os.waitstatus_to_exitcode(status)})
        # orphans re-parented here (this is a subreaper) because their keeper was SIGKILLed
        containment.kill_orphans(self.keepers)

    def _hang_up(self, conn: socket.socket) -> None:
        for standby in self.standbys.values():
            if standby.parked is not None and standby.parked[0] is conn:
                standby.parked = None            # its host went before the standby was ready
        pid: Optional[int] = self.trial_of.pop(conn, None)
        if pid is not None:          # the host was cancelled or died: its trial goes too
            _stop(pid)               # the keeper ends the whole tree; its group gets SIGKILL if it hangs
            self.doomed[pid] = time.monotonic() + STOP_GRACE_S
            self.abandoned.add(pid)
            self.host_of.pop(pid, None)
        self.selector.unregister(conn)
        self.buffers.pop(conn, None)
        conn.close()

    def _until_backstop(self) -> Optional[float]:
        deadlines = [*self.doomed.values(), *self._parked_deadlines()]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _backstop(self) -> None:
        """A keeper that did not end its trial within the grace period: SIGKILL its group."""
        now = time.monotonic()
        for pid, deadline in list(self.doomed.items()):
            if deadline <= now:
                _kill_group(pid)
                del self.doomed[pid]
        self._unpark_late(now)


def main() -> None:
    parent = os.environ.pop(PARENT_PID, "")         # so no trial outlives its host
    if not containment.die_with(int(parent) if parent else os.getppid(), signal.SIGKILL):
        os._exit(1)
    containment.set_child_subreaper()                # orphans of a SIGKILLed keeper come here, to be ended
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the driver's to handle
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_address(sys.argv[1]))
    listener.listen(128)
    ready = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                    # stray prints go to stderr
    youngcollector.widen_for_start()  # for its imports, now and on a preload request; each trial restores
    _preload()
    _freeze()
    mark("zygote_ready")
    ready.write(json.dumps({"ready": os.getpid()}) + "\n")
    ready.close()
    Zygote(listener).serve()


if __name__ == "__main__":
    main()
