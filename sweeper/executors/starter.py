"""The thread a local Ray is started from (or a cluster attached to), while the driver composes
and plans: Ray's start overlaps the driver's own work, and the driver waits on it only when it
needs the cluster (sweeper/executors/ray_executor.py)."""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional


class Starter:
    """Runs `connect` in a thread of its own that stays until `release`: Linux ends Ray's
    processes when the thread that started them ends."""

    def __init__(self, connect) -> None:
        self.connect, self.error = connect, None
        self.done, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name="ray-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            _quiet_thread_warning()
            self.connect()
        except BaseException as exc:             # handed to the caller of `wait`
            self.error = exc
        finally:
            self.done.set()
        self.released.wait()

    def wait(self, timeout_s: Optional[float] = None) -> bool:
        """Until Ray is up (True) or `timeout_s` has passed (False); raises what its start raised."""
        if not self.finished(timeout_s):
            return False
        if self.error is not None:
            raise self.error
        return True

    def finished(self, timeout_s: Optional[float] = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.done.wait(0.5):   # timed: Ctrl-C and SIGTERM still reach this thread
            if deadline is not None and time.monotonic() > deadline:
                return False
        return True

    def release(self) -> None:
        self.released.set()


class _NotFromThisThread(logging.Filter):
    """Ray warns that it set no SIGTERM handler outside the main thread: the driver has its own
    (sweeper/interrupts.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


def _quiet_thread_warning() -> None:
    logger = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NotFromThisThread) for f in logger.filters):
        logger.addFilter(_NotFromThisThread())
