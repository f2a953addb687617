"""Views of a run published at its end (cells.parquet, the report, W&B), and per trial (W&B).

The driver calls three things:

    publishers.on_trial(run, record, root)              # after each trial; returns at once
    publishers.on_sweep_end(run, data, analysis, root)  # once, with the run's one Analysis
    print(publishers.terminal_end(data, analysis, root, run))

`data, analysis` come from `sweeper.analysis.run.analyze_run(run, cfg, records)`, called
once. Each publisher is guarded: its failure is one logged line and never fails the
sweep or loses a result. Trial hooks run in one background thread, in order, so a slow
one (a W&B run costs about 0.2 s) never holds up the driver between trials; the sweep-end
publishers wait for them. Heavy imports (matplotlib, wandb) happen inside the publishers.
"""
from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

log = logging.getLogger(__name__)

TrialHook = Callable[[Path, Dict[str, Any], Dict[str, Any]], None]   # run folder, record, root config
SweepPublisher = Callable[[Path, Any, Any, Dict[str, Any]], None]   # run folder, RunData, Analysis, root config

TRIAL_HOOKS: List[TrialHook] = []
SWEEP_PUBLISHERS: List[SweepPublisher] = []
# name -> (run folder, record, root config) -> {"run_id": ..., "url": ...} or None (not tracking)
TRACKER_IDS: Dict[str, Callable[[Path, Any, Dict[str, Any]], Optional[Dict[str, Any]]]] = {}


def _guarded(hook, *args) -> None:
    try:
        hook(*args)
    except Exception as exc:   # a publisher is never worth a lost sweep
        name = f"{getattr(hook, '__module__', '')}.{getattr(hook, '__name__', hook)}".lstrip(".")
        log.warning("output %s failed: %s: %s", name, type(exc).__name__, exc)


class _Background:
    """One thread that runs the trial hooks in the order the trials finished."""

    def __init__(self) -> None:
        self.jobs: "queue.Queue" = queue.Queue()
        self.thread = None

    def put(self, args) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._work, name="sweeper-publishers", daemon=True)
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


def on_trial(run: Path, record: Any, root: Dict[str, Any]) -> None:
    """Queues the trial hooks (a W&B run per trial) for a finished trial; returns at once."""
    if TRIAL_HOOKS:
        record = record.to_dict() if hasattr(record, "to_dict") else record
        _background.put((run, record, root))


def trackers(run: Path, record: Any, root: Dict[str, Any]) -> Dict[str, Any]:
    """Where each tracker will hold this trial (its run id, and URL where known), decided before
    the trial's record is written so that the record names them. A tracker that fails names nothing."""
    out = dict(getattr(record, "trackers", None) or {})
    for name, hook in TRACKER_IDS.items():
        try:
            found = hook(run, record, root)
        except Exception as exc:   # a tracker is never worth a lost record
            log.warning("tracker %s: %s: %s", name, type(exc).__name__, exc)
            found = None
        if found:
            out[name] = found
    return out


def drain() -> None:
    """Waits until the trial hooks of every trial so far have run."""
    _background.drain()


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> None:
    """cells.parquet/csv, report.html/md (report.enabled), the W&B summary run (wandb.*), the
    history store (history.enabled),
    each a view of `analysis`; waits for the trial hooks first."""
    drain()
    for publish in SWEEP_PUBLISHERS:
        _guarded(publish, Path(run), data, analysis, root)


def terminal_end(data: Any, analysis: Any, root: Dict[str, Any], run: Path) -> str:
    """What the terminal shows when a sweep ends (see sweeper.publishers.terminal)."""
    from sweeper.publishers.terminal import end_text

    return end_text(data, analysis, root, Path(run))


def _register_builtin() -> None:
    """cells.parquet first (the pandas summary), then the report (the W&B summary run
    carries its figures), then W&B, then the W&B report's spec (wandb_report.json)."""
    from sweeper.publishers import cells_files, history_sink, report_sink, wandb_report, wandb_sink

    TRIAL_HOOKS.append(wandb_sink.on_trial)
    TRACKER_IDS["wandb"] = wandb_sink.tracker
    # history before the W&B report: the report shows the run's alerts across nights
    SWEEP_PUBLISHERS.extend([cells_files.on_sweep_end, report_sink.on_sweep_end, wandb_sink.on_sweep_end,
                             history_sink.on_sweep_end, wandb_report.on_sweep_end])


def _register_mlflow() -> None:
    """MLflow (mlflow.enabled=true), after the others: the trial's nested run is created
    before its record is written and filled in the background; the sweep's parent run gets
    cells.parquet/csv and the report once they are written."""
    from sweeper.publishers import mlflow_sink

    TRACKER_IDS["mlflow"] = mlflow_sink.tracker_id
    TRIAL_HOOKS.append(mlflow_sink.on_trial)
    SWEEP_PUBLISHERS.append(mlflow_sink.on_sweep_end)


_register_builtin()
_register_mlflow()
