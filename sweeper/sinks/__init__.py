"""Side effects after a trial or a sweep (reports, W&B, exporters).

The launcher calls these two hooks; each sink is wrapped so that its failure is
logged as one line and never fails the sweep or loses a result.
"""
from __future__ import annotations

import logging
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


def on_trial(run: Path, record: Dict[str, Any], root: Dict[str, Any]) -> None:
    for hook in TRIAL_HOOKS:
        _guarded(hook, run, record, root)


def on_sweep_end(run: Path, records: List[Dict[str, Any]], root: Dict[str, Any]) -> None:
    for hook in SWEEP_HOOKS:
        _guarded(hook, run, records, root)


def _register_builtin() -> None:
    """The report first: the W&B summary run carries its figures. Both import their heavy
    parts (matplotlib, wandb) only when they run."""
    from sweeper.sinks import report_sink, wandb_sink

    TRIAL_HOOKS.append(wandb_sink.on_trial)
    SWEEP_HOOKS.extend([report_sink.on_sweep_end, wandb_sink.on_sweep_end])


_register_builtin()
