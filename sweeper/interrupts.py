"""Ctrl-C and SIGTERM, the same at every phase of a run: a KeyboardInterrupt where the
program is, one line on stderr, exit 130 (exitcodes.INTERRUPTED).

Handlers are set explicitly for both signals: a background job of a shell script starts
with SIGINT ignored, and Python then installs no handler of its own; SIGTERM's default
would end the process at once, silently, with exit 143.
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from sweeper import exitcodes

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextmanager
def stop_signals(handler: Callable = raise_interrupt) -> Iterator[None]:
    """SIGINT and SIGTERM call `handler` (default: raise KeyboardInterrupt) inside the block."""
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


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


def interrupted(line: str) -> int:
    """The one line an interrupt prints; returns the exit code."""
    print(f"interrupted {line}", file=sys.stderr, flush=True)
    return exitcodes.INTERRUPTED
