"""What the zygote (sweeper/_zygote.py) does for prestarted trials (sweeper/standby.py): its
standbys, one per environment, made as a trial starts and handed the next trial of that
environment; requests that wait for a standby still starting CUDA; and the reports on a trial's
pipe ("ready" from a standby, "done" once a trial's record is written)."""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Dict, Optional, Set, Tuple

from sweeper.standby import hold, lock_paths, release, visible_devices

STANDBY_READY_S = 60      # a standby's CUDA start takes a second at most; one stuck longer is killed
PARKED_WAIT_S = 5         # a request waits this long for its standby's start, then is forked fresh


def send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:                  # the host went away; its trial is being ended
        pass


@dataclass
class Standby:
    """A standby's keeper, the write end of the pipe its trial process reads its request from, and
    the request (with its connection) that waits for its CUDA's start."""
    keeper: int
    feed: int
    key: str
    parked: Optional[Tuple[socket.socket, dict]] = None
    parked_until: float = 0.0


def standby_key(request: dict) -> str:
    return json.dumps(request.get("env", {}), sort_keys=True)


def _devices(key: str) -> list:
    return visible_devices(json.loads(key))


class StandbyKeeping:
    """The zygote's standbys and trial reports; the zygote's own state (selector, keepers, doomed,
    hosts) and its `_fork`, `_started` and `_send` are the Zygote's."""
    reports: Dict[int, int]
    standbys: Dict[str, "Standby"]
    ready: Set[int]
    cold: Set[str]

    def _next_locks(self, request: dict, key: str, handing: Optional["Standby"] = None) -> Optional[list]:
        """The next standby's GPU locks, where the request asks for one (`handing`: the standby the
        request is about to take): taken before its trial is handed over or forked, so that trial's
        first measured step cannot pass them unheld."""
        if not (request.get("prestart") and request.get("next")) or key in self.cold:
            return None
        current = self.standbys.get(key)
        if current is not None and current is not handing:
            return None
        return hold(lock_paths(request.get("env", {})))

    def _hand_to_standby(self, standby: Standby, request: dict) -> Optional[int]:
        """The standby's keeper, now running the request's trial; None where it has just died."""
        del self.standbys[standby.key]
        try:
            os.write(standby.feed, (json.dumps({"scratch": request["scratch"]}) + "\n").encode())
        except OSError:              # reaped as any keeper
            return None
        finally:
            os.close(standby.feed)
        return standby.keeper

    def _fork_standby(self, key: str, request: dict, locks: Optional[list] = None) -> None:
        feed, write_end = os.pipe()
        self.standbys[key] = Standby(0, write_end, key)      # closed in the child by _close_in_child
        if locks is None:            # held from before its fork: no trial's check can pass them unheld
            locks = hold(lock_paths(request.get("env", {})))
        pid = self._fork(request, feed, locks)
        self.standbys[key].keeper = pid
        self.doomed[pid] = time.monotonic() + STANDBY_READY_S     # CUDA's start stuck: killed, and the key cold

    def _retire_overlapping(self, key: str) -> None:
        """At most one idle standby per GPU: one for other GPUs that share some with this trial's
        (a cell on GPUs 0,1 beside one on GPU 0) goes, unless a request waits for it."""
        devices = set(_devices(key))
        for other, standby in list(self.standbys.items()):
            if other != key and standby.parked is None and devices & set(_devices(other)):
                del self.standbys[other]
                os.close(standby.feed)

    def _report(self, fd: int) -> None:
        pid = self.reports.get(fd)
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_report(fd)
            return
        for word in data.split():
            if word == b"ready":
                self.ready.add(pid)
                self.doomed.pop(pid, None)
                self._unpark(pid)
            elif word == b"done":
                self._record_written(pid)

    def _record_written(self, pid: int) -> None:
        """The host's answer now: the trial's record is whole while its process still ends."""
        conn = self.host_of.pop(pid, None)
        if conn is not None:
            self.trial_of.pop(conn, None)
            send(conn, {"pid": pid, "exit": 0})

    def _close_report(self, fd: int) -> None:
        if self.reports.pop(fd, None) is None:
            return
        self.selector.unregister(fd)
        os.close(fd)

    def _run_trial(self, conn: socket.socket, request: dict, standby: Optional[Standby] = None) -> None:
        """The request's trial: in `standby` (ready) where it is still alive, else forked fresh. The
        next standby's locks are taken before the hand-off, but after a fresh fork: a trial process
        that inherited them would wait for its own first measured step's quiet for good."""
        key = standby_key(request)
        if standby is not None:
            locks = self._next_locks(request, key, standby)
            pid = self._hand_to_standby(standby, request)
            if pid is not None:
                self._started(conn, request, pid, locks)
                return
            release(locks or [])
        pid = self._fork(request)
        self._started(conn, request, pid, self._next_locks(request, key))

    def _unpark(self, pid: int) -> None:
        """A standby is ready: the request that waited for it runs there."""
        for standby in list(self.standbys.values()):
            if standby.keeper == pid and standby.parked is not None:
                self._run_trial(*standby.parked, standby)

    def _parked_deadlines(self) -> list:
        return [s.parked_until for s in self.standbys.values() if s.parked is not None]

    def _unpark_late(self, now: float) -> None:
        """A request whose standby has not started CUDA within PARKED_WAIT_S: forked fresh."""
        for standby in list(self.standbys.values()):
            if standby.parked is not None and standby.parked_until <= now:
                parked, standby.parked = standby.parked, None
                self._run_trial(*parked)

    def _discard_standbys(self) -> None:
        standbys = list(self.standbys.values())
        self.standbys.clear()
        for standby in standbys:
            os.close(standby.feed)       # its trial process reads the end of the pipe and exits
            if standby.parked is not None:
                self._run_trial(*standby.parked)

    def _standby_gone(self, pid: int) -> None:
        """A keeper reaped: a standby that ended before any trial took it could not start CUDA
        (this environment's trials are then forked fresh); and its report pipe goes."""
        was_ready = pid in self.ready
        self.ready.discard(pid)
        for key, standby in list(self.standbys.items()):
            if standby.keeper == pid:
                os.close(standby.feed)
                del self.standbys[key]
                if not was_ready:
                    self.cold.add(key)
                    print(f"zygote: a standby for {key} ended before its CUDA started; trials there start "
                          f"fresh from now on", file=sys.stderr, flush=True)
                if standby.parked is not None:       # the trial that waited for it starts fresh
                    self._run_trial(*standby.parked)
        for fd, keeper in list(self.reports.items()):
            if keeper == pid:
                self._close_report(fd)
