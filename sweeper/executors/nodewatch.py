"""The local Ray node a sweep started, watched by its driver: the raylet's death is known at once.

The driver started the node's processes itself, so it waits on them (a pidfd each) instead of on
Ray's heartbeats: Ray calls the node dead only after about 15-20 s of missed heartbeats, and each
trial still waiting then became a `LocalRayletDiedError` row. The moment the raylet (or the GCS
server) exits, the watch notes how it ended and which trials had their host running on the node:
their Ray workers follow the raylet within a second or two, and their scratch folders with them.

A raylet that dies while Ray starts leaves `ray.init` waiting 30 s for it to register, then
failing with an error that read as a bug in sweeper; `raise_if_node_died` makes it the same one
line and exit code as a node lost mid-sweep.

`quiet_node_death` keeps Ray's own account of that death off the terminal (the raylet's last 20
log lines, published twice, and the node's removal): the driver says it in one line that names
the session folder where Ray's logs are.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from typing import Callable, Dict, FrozenSet, Iterator, Optional

from sweeper import exitcodes
from sweeper.errors import SweeperError

VITAL = {"raylet": "its raylet", "gcs_server": "its GCS server"}    # Ray's process types: the node without them is gone
NODE_DEATH_ERRORS = ("raylet_died", "node_removed")                # the types Ray publishes to the driver for it


def how_it_ended(who: str, returncode: int) -> str:
    """'its raylet was killed by SIGKILL: ...' or 'its raylet exited with code 1' (a Popen's returncode)."""
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else f"signal {-returncode}"
        why = ": the kernel's out-of-memory killer, or someone" if -returncode == signal.SIGKILL else ""
        return f"{who} was killed by {name}{why}"
    return f"{who} exited with code {returncode}"


def vital_processes() -> Dict[str, object]:
    """The raylet and GCS server of the local node this driver started (their Popen objects)."""
    from ray._private import worker

    node = worker._global_node
    found = node.all_processes.items() if node is not None else ()
    return {kind: infos[0].process for kind, infos in found if kind in VITAL and infos}


class NodeDiedStarting(SweeperError):
    """The local node's raylet or GCS server died while Ray started: nothing ran."""
    code = exitcodes.NODE_LOST


def raise_if_node_died() -> None:
    """After `ray.init` of a local Ray failed: the one line, when it failed because the node's
    raylet or GCS server died (Ray left it an unreaped child of this process)."""
    what = died_starting()
    if what is not None:
        raise NodeDiedStarting(f"the local Ray node stopped while Ray started ({what}); no trial ran; run the "
                               f"command again") from None


def died_starting() -> Optional[str]:
    """How the first of this process's children named as Ray's vital processes that has exited
    ended (it is reaped here); None when none has."""
    import psutil

    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError):
            name = child.name()                  # before it is reaped: then psutil knows it no more
            if name in VITAL and child.status() == psutil.STATUS_ZOMBIE:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
                if pid:
                    return how_it_ended(VITAL[name], os.waitstatus_to_exitcode(status))
    return None


class NodeWatch:
    """A thread that waits on the node's vital processes (their Popen objects, by Ray's process
    type) and, on the first exit, records how it ended and calls `snapshot` for the trials then running."""

    def __init__(self, processes: Dict[str, object], snapshot: Callable[[], FrozenSet[str]]) -> None:
        self.processes, self.snapshot = processes, snapshot
        self.what: Optional[str] = None
        self.running: FrozenSet[str] = frozenset()
        self.stopped = threading.Event()
        self.wake, self.woken = os.pipe()              # close() wakes the thread at once: no wait at every sweep's end
        self.thread = threading.Thread(target=self._watch, name="ray-node-watch", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        fds = _pidfds(self.processes)
        try:
            while not self.stopped.is_set() and self.what is None:
                # without a pidfd (an old kernel), the processes are looked at five times a second
                select.select([*fds, self.wake], [], [], None if fds else 0.2)
                self._check()
        finally:
            for fd in [*fds, self.wake]:
                os.close(fd)

    def _check(self) -> None:
        for kind, proc in self.processes.items():
            code = proc.poll()
            if code is not None and not self.stopped.is_set():
                self.running = self._running_now()      # first: the trials' workers follow within seconds
                self.what = how_it_ended(VITAL.get(kind, kind), code)
                return

    def _running_now(self) -> FrozenSet[str]:
        try:
            return self.snapshot()
        except Exception:       # the loss must still be noted; those trials then count as not started
            return frozenset()

    def close(self) -> None:
        """Stands down before the driver ends the node itself."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        with contextlib.suppress(OSError):           # the thread has ended already (the node did)
            os.write(self.woken, b"x")
        self.thread.join(timeout=5)
        os.close(self.woken)


def _pidfds(processes: Dict[str, object]) -> Dict[int, object]:
    fds = {}
    for proc in processes.values():
        with contextlib.suppress(AttributeError, OSError):
            fds[os.pidfd_open(proc.pid)] = proc
    return fds


class _WithoutNodeDeath:
    """Ray's error subscriber on the driver, less the messages about the node's death."""

    def __init__(self, subscriber) -> None:
        self._subscriber = subscriber

    def poll(self, *args, **kwargs):
        while True:
            key, data = self._subscriber.poll(*args, **kwargs)
            if data is None or data.get("type") not in NODE_DEATH_ERRORS:
                return key, data

    def __getattr__(self, name):
        return getattr(self._subscriber, name)


@contextlib.contextmanager
def quiet_node_death() -> Iterator[None]:
    """Around the `ray.init` that starts a local Ray: the thread Ray starts to print the errors
    it publishes to this driver skips the node's death. Where this Ray has no such thread or
    subscriber, it is left as it is."""
    from ray._private import worker

    listen = getattr(worker, "listen_error_messages", None)
    if listen is None:
        yield
        return

    def without_node_death(driver, *args, **kwargs):
        subscriber = getattr(driver, "gcs_error_subscriber", None)
        if subscriber is not None:
            driver.gcs_error_subscriber = _WithoutNodeDeath(subscriber)
        return listen(driver, *args, **kwargs)

    worker.listen_error_messages = without_node_death
    try:
        yield
    finally:
        worker.listen_error_messages = listen
