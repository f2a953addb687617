"""Side effects after a trial or a sweep (reports, W&B, exporters).

The launcher calls these two hooks; each sink is wrapped so that its failure is
logged as one line and never fails the sweep or loses a result. Trial hooks run
in one background thread, in order, so a slow sink (a W&B run costs about 0.2 s)
never holds up the driver between trials; the sweep-end hooks wait for them.
"""
from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List

log = logging.getLogger(__name__)

TrialHook = Callable[[Path, Dict[str, Any], Dict[str, Any]], None]        # run folder, record, root config
SweepHook = Callable[[Path, List[Dict[str, Any]], Dict[str, Any]], None]  # run folder, records, root config

TRIAL_HOOKS: List[TrialHook] = []
SWEEP_HOOKS: List[SweepHook] = []


def _guarded(hook, *args) -> None:
    try:
        hook(*args)
    except Exception as exc:   # a sink is never worth a lost sweep
        log.warning("output %s failed: %s: %s", getattr(hook, "__name__", hook), type(exc).__name__, exc)


class _Background:
    """One thread that runs the trial hooks in the order the trials finished."""

    def __init__(self) -> None:
        self.jobs: "queue.Queue" = queue.Queue()
        self.thread = None

    def put(self, args) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._work, name="sweeper-sinks", daemon=True)
            self.thread.start()
        self.jobs.put(args)

    def _work(self) -> None:
        while True:
            args = self.jobs.get()
            try:
                for hook in TRIAL_HOOKS:
                    _guarded(hook, *args)
            finally:
                self.jobs.task_done()

    def drain(self) -> None:
        self.jobs.join()


_background = _Background()


def on_trial(run: Path, record: Dict[str, Any], root: Dict[str, Any]) -> None:
    if TRIAL_HOOKS:
        _background.put((run, record, root))


def drain() -> None:
    """Waits until the trial hooks of every trial so far have run."""
    _background.drain()


def on_sweep_end(run: Path, records: List[Dict[str, Any]], root: Dict[str, Any]) -> None:
    drain()
    for hook in SWEEP_HOOKS:
        _guarded(hook, run, records, root)


def _register_builtin() -> None:
    """The report first: the W&B summary run carries its figures. Both import their heavy
    parts (matplotlib, wandb) only when they run."""
    from sweeper.sinks import report_sink, wandb_sink

    TRIAL_HOOKS.append(wandb_sink.on_trial)
    SWEEP_HOOKS.extend([report_sink.on_sweep_end, wandb_sink.on_sweep_end])


_register_builtin()
