"""Ctrl-C and SIGTERM, the same at every phase of a run: a KeyboardInterrupt where the
program is, one line on stderr, exit 130 (exitcodes.INTERRUPTED).

Handlers are set explicitly for both signals: a background job of a shell script starts
with SIGINT ignored, and Python then installs no handler of its own; SIGTERM's default
would end the process at once, silently, with exit 143.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from sweeper import exitcodes

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_open_blocks = 0                       # stop_signals blocks open (the main thread's only)
_arrived: Optional[int] = None         # the stop signal raise_interrupt got inside them, if one came
_said = False                          # this command printed its one line (kept past its last block)


def raise_interrupt(signum, frame) -> None:
    """Remembers the signal before it raises: a library may swallow the KeyboardInterrupt (Hydra
    reads hydra.mode under `except Exception`, and omegaconf's clean-up turns the interrupt into
    an AttributeError there), and the command must not then carry on as if never stopped."""
    global _arrived
    _arrived = signum
    if in_import_machinery(frame):
        _again_soon(signum)
        return
    raise KeyboardInterrupt


IMPORT_MACHINERY = "<frozen importlib"
AGAIN_AFTER_S = 0.02


def in_import_machinery(frame) -> bool:
    """Whether the signal came while importlib itself ran (taking or giving back a module's lock):
    an exception raised there left that lock held, and the next import of the module, by Ray's
    start thread or this one, waited for it for good (one stop in six at 1 s into a sweep)."""
    return frame is not None and frame.f_code.co_filename.startswith(IMPORT_MACHINERY)


def _again_soon(signum: int) -> None:
    """The same signal a moment later, when the interpreter has left the import machinery."""
    timer = threading.Timer(AGAIN_AFTER_S, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()


def raise_if_stopped() -> None:
    """Raises KeyboardInterrupt again if a stop signal came in this command's stop_signals block:
    for code that runs only where a library swallowed the first one (sweeper.__main__.run_in_process)."""
    if _arrived is not None:
        raise KeyboardInterrupt


@contextmanager
def stop_signals(handler: Callable = raise_interrupt) -> Iterator[None]:
    """SIGINT and SIGTERM call `handler` (default: raise KeyboardInterrupt) inside the block.
    A signal raise_interrupt got is remembered until the outermost block ends."""
    global _open_blocks, _arrived, _said
    if not _open_blocks:
        _said = False                  # a command starts: its stop has said nothing yet
    _open_blocks += 1
    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        try:
            for sig, old in previous.items():
                signal.signal(sig, old)
        finally:
            _open_blocks -= 1
            if not _open_blocks:
                _arrived = None        # the command has ended; the next one starts afresh


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait for the block to end (a finished trial's folder written whole and
    counted), then act as they would have. Only the main thread handles signals; elsewhere the
    block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if caught:
            signal.raise_signal(caught[0])


SUITE_PID = "SWEEPER_SUITE_PID"        # set by the overnight suite for the sweeps it starts


def started_by_this_suite() -> dict:
    """The environment of a sweep the overnight suite starts: the sweep stops when the suite dies."""
    return {**os.environ, SUITE_PID: str(os.getpid())}


def stop_with_suite() -> None:
    """A sweep the overnight suite started stops, keeping what finished, when the suite dies,
    however it dies (SIGKILL included): Linux sends it SIGHUP then (PR_SET_PDEATHSIG). Without
    this it ran on, unseen, into a night that a resume could be writing by then."""
    suite = os.environ.pop(SUITE_PID, None)      # not for the processes this sweep starts
    if not suite:
        return
    from sweeper.containment import die_with

    signal.signal(signal.SIGHUP, _suite_gone)
    if not die_with(int(suite), signal.SIGHUP):
        _suite_gone(signal.SIGHUP, None)


def _suite_gone(signum, frame) -> None:
    """The suite's end of this sweep's stderr went with it: stderr goes to /dev/null (a write
    would fail), and the sweep stops as on SIGTERM."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    handler = signal.getsignal(signal.SIGTERM)
    if callable(handler):
        handler(signal.SIGTERM, frame)
    else:
        signal.raise_signal(signal.SIGTERM)


def interrupted(line: str) -> int:
    """The one line a stop prints, the first one said in a command: a second Ctrl-C while the
    first one's stop runs (cancelling trials, ending a Ray being started) adds no line of its own,
    whichever phase catches it. Returns the exit code."""
    global _said
    if not _said:
        print(f"interrupted {line}", file=sys.stderr, flush=True)
    _said = True
    return exitcodes.INTERRUPTED
