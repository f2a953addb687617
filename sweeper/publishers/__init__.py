"""Views of a run, per trial (W&B, MLflow) and at its end: each gets data, never another's files.

The driver calls three things:

    publishers.on_trial(run, record, root)            # after each trial; returns at once
    publishers.trackers(run, record, root)            # before a record is written: where trackers hold it
    print(publishers.end_of_sweep(run, records, root, cfg, cost))   # once, with the records it holds

`end_of_sweep` computes the run's one Analysis from the records (not re-read from disk),
records the run into the history store (sweeper.history.record_run), then hands both as one
`SweepEnd` to every sweep-end view: cells.parquet, the report, W&B's summary run, alert and
report spec, MLflow; then the terminal's text. Each view is guarded: its failure is one line
on stderr (and a note in the run's history record); the others still get their input. Trial
hooks run in one background thread, in order, so a slow one (a W&B run costs about 0.2 s)
never holds up the driver between trials; the sweep-end views wait for them. Heavy imports
(matplotlib, wandb, mlflow) happen inside the views.
"""
from __future__ import annotations

import queue
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from sweeper.analysis.model import Analysis, RunData
    from sweeper.history import Recorded


@dataclass(frozen=True)
class SweepEnd:
    """What every sweep-end view gets: the run folder, its RunData and one Analysis, the root
    config (a resolved dict) and what the history recorded (None: history off, or it failed)."""
    run: Path
    data: "RunData"
    analysis: "Analysis"
    root: Dict[str, Any]
    history: Optional["Recorded"] = None      # the store and the run's regressions

    def alert_lines(self) -> List[str]:
        """The run's regressions across nights, a line each ([]: none found, or no history)."""
        return self.history.lines() if self.history is not None else []


TrialHook = Callable[[Path, Dict[str, Any], Dict[str, Any]], None]   # run folder, record, root config
SweepPublisher = Callable[[SweepEnd], Optional[str]]                 # returns a note for the record, or None

TRIAL_HOOKS: List[TrialHook] = []
SWEEP_PUBLISHERS: List[SweepPublisher] = []
# name -> (run folder, record, root config) -> {"run_id": ..., "url": ...} or None (not tracking)
TRACKER_IDS: Dict[str, Callable[[Path, Any, Dict[str, Any]], Optional[Dict[str, Any]]]] = {}


def _name(hook: Any) -> str:
    return f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', hook)}".lstrip(".")


def failure_line(what: str, exc: BaseException) -> str:
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{what} failed: {type(exc).__name__}: {first}"


def _guarded(hook, *args) -> Tuple[Any, Optional[str]]:
    """(the hook's answer, None), or (None, the line that said it failed, on stderr)."""
    try:
        return hook(*args), None
    except Exception as exc:   # a view is never worth a lost sweep, nor another view's input
        line = failure_line(f"output {_name(hook)}", exc)
        print(f"warning: {line}", file=sys.stderr, flush=True)
        return None, line


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
            print(f"warning: {failure_line(f'tracker {name}', exc)}", file=sys.stderr, flush=True)
            found = None
        if found:
            out[name] = found
    return out


def drain() -> None:
    """Waits until the trial hooks of every trial so far have run."""
    _background.drain()


def end_of_sweep(run: Path, records: Sequence[Any], root: Dict[str, Any], cfg: Any, cost: Any = None) -> str:
    """The sweep's end: one Analysis of the records the driver holds, the history, every view;
    returns the terminal's text. `cfg`, `cost`: the run's AnalysisConfig and CostConfig."""
    from sweeper.analysis.run import analyze_run

    data, analysis = analyze_run(Path(run), cfg, records=records, cost=cost)
    return terminal_end(on_sweep_end(run, data, analysis, root))


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> SweepEnd:
    """Waits for the trial hooks, records the run into the history, then calls every view with
    the same SweepEnd; returns it. The history's record of the run (history_alerts.json, for
    the overnight suite) is written last, with the notes the views returned."""
    from sweeper import history

    drain()
    recorded, failed = _guarded(history.record_run, Path(run), data, analysis, root)
    notes = [failed] if failed else []
    end = SweepEnd(Path(run), data, analysis, root, recorded)
    for publish in SWEEP_PUBLISHERS:
        note, failed = _guarded(publish, end)
        notes += [n for n in (note, failed) if isinstance(n, str) and n]
    if recorded is not None:
        _guarded(history.write_recorded, Path(run), recorded, notes)
    return end


def terminal_end(end: SweepEnd) -> str:
    """What the terminal shows when a sweep ends (see sweeper.publishers.terminal)."""
    from sweeper.publishers.terminal import end_text

    return end_text(end)


def _register_builtin() -> None:
    """cells.parquet, the report, W&B's summary run (it attaches the report's figures when they
    were drawn), the W&B alert for the run's regressions, the W&B report's spec."""
    from sweeper.publishers import cells_files, report_sink, wandb_report, wandb_sink

    TRIAL_HOOKS.append(wandb_sink.on_trial)
    TRACKER_IDS["wandb"] = wandb_sink.tracker
    SWEEP_PUBLISHERS.extend([cells_files.on_sweep_end, report_sink.on_sweep_end, wandb_sink.on_sweep_end,
                             wandb_sink.alert, wandb_report.on_sweep_end])


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
