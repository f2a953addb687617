"""MLflow tracking: a parent run per sweep, a nested run per trial (`mlflow.enabled=true`).

A trial's run (nested: its `mlflow.parentRunId` tag names the sweep's run), named by its
trial id:
  params   the trial's flat row's own keys (sweeper.record.flat_row): swept axes by their
           dotted keys, trial_id, cell_id, repeat, is_baseline, status, workload, resources,
           error, overrides, host
  metrics  the row's figures: items_per_s, step_p50_s, step_p95_s, step_mean_s, step_cv,
           steps, phase_*, memory maxima and the workload's scalar figures (the same values as
           summary.parquet); and per-step series of step_s and every phase_* column of
           steps.parquet at their step numbers, for the measured steps only (the ones the
           probe did not flag as warm-up or aborted: what the statistics use)
  artifacts  the trial folder (trial.json, steps.parquet, config.yaml, trial.log, ...)
The sweep's run, named by the run id: the analysis' per-cell table (cells.parquet and
cells.csv as cells_files wrote them from the Analysis), report.html/md and its figures,
summary.parquet; the recommended cell as tags and params, its value and gain as metrics; the
run's regressions across nights (the history's alerts) as a tag and a count, when there are any.

The trial's run is created just before the trial's record is written (the TRACKER_IDS
hook), so trial.json names it under `trackers.mlflow.run_id`; its contents are logged in
the publishers' background thread. <run folder>/mlflow.json holds the tracking URI, the
experiment, the parent run and each trial's run id (a resumed run reuses the parent).

The default store is sqlite:///<run folder>/mlflow.db with artifacts under
<run folder>/mlruns: MLflow's file store (./mlruns) refuses to start unless
MLFLOW_ALLOW_FILE_STORE=true (maintenance mode since 3.x), and sqlite needs no server.
mlflow is imported here only. Any failure is one line on stderr, after which this sweep
logs nothing more to MLflow; the sweep itself goes on.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from sweeper.redact import redact_text


STATE_FILE = "mlflow.json"
DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlruns"
_BATCH = 1000                      # MLflow's limit of metrics in one log_batch call
_PARAM_CHARS = 500                 # long values (an error message) are cut to this
_NOT_PARAMS = ("pid", "started_at")   # the run itself holds when and where it ran


def settings(root: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The `mlflow:` section with its defaults, or None when MLflow is off."""
    from sweeper.schema import MlflowConfig

    cfg = {**dataclasses.asdict(MlflowConfig()), **((root or {}).get("mlflow") or {})}
    return cfg if cfg["enabled"] else None


def default_tracking_uri(run: Path) -> str:
    return f"sqlite:///{(Path(run) / DB_FILE).resolve()}"


class _Tracker:
    """One run folder's MLflow connection: the client, the experiment and the parent run.
    `failed` is set by the first failure; after it nothing more is sent."""

    def __init__(self, run: Path, cfg: Dict[str, Any]):
        self.run, self.cfg = Path(run), cfg
        self.uri = cfg["tracking_uri"] or default_tracking_uri(self.run)
        self.client = None
        self.experiment_id: Optional[str] = None
        self.parent_id: Optional[str] = None
        self.trials: Dict[str, str] = {}
        self.failed = False
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ failures

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Runs the block unless MLflow already failed; a failure is one line, then silence."""
        try:
            yield
        except Exception as exc:   # MLflow is never worth a lost sweep
            if not self.failed:
                self.failed = True
                print(f"warning: mlflow: {what} failed ({redact_text(self.uri)}): {type(exc).__name__}: "
                      f"{_one_line(exc, self.uri)}; no more MLflow logging in this sweep", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ setup

    def start(self) -> bool:
        """Connects, finds or creates the experiment and the sweep's parent run, once."""
        with self.lock:
            if self.failed or self.parent_id is not None:
                return not self.failed
            with self.guard("connecting"):
                self._connect()
            return not self.failed

    def _connect(self) -> None:
        _quiet_mlflow_logs()
        from mlflow import MlflowClient

        embedded = not self.cfg["tracking_uri"]
        if embedded:
            self.run.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=self.uri)
        with _first_contact(self.uri):
            experiment = self.client.get_experiment_by_name(self.cfg["experiment"])
        if experiment is not None:
            self.experiment_id = experiment.experiment_id
        else:
            location = (self.run / ARTIFACTS_DIR).resolve().as_uri() if embedded else None
            self.experiment_id = self.client.create_experiment(self.cfg["experiment"], artifact_location=location)
        saved = self._saved()
        if saved.get("parent_run_id") and saved.get("tracking_uri") == redact_text(self.uri) \
                and saved.get("experiment_id") == self.experiment_id:
            self.parent_id, self.trials = saved["parent_run_id"], dict(saved.get("trials") or {})
            self.client.update_run(self.parent_id, status="RUNNING")       # a resumed run
        else:
            name = self.run.name
            parent = self.client.create_run(self.experiment_id, run_name=name,
                                            tags={"sweeper.run_id": name, "sweeper.sweep": self.run.parent.name,
                                                  "sweeper.role": "sweep"})
            self.parent_id = parent.info.run_id
        self.save()

    def _saved(self) -> Dict[str, Any]:
        try:
            return json.loads((self.run / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def save(self) -> None:
        """mlflow.json: where this run's MLflow runs are (written atomically)."""
        from sweeper.files import write_json_atomic

        state = {"tracking_uri": redact_text(self.uri), "experiment": self.cfg["experiment"], "experiment_id": self.experiment_id,
                 "parent_run_id": self.parent_id, "parent_url": self.url(self.parent_id), "trials": self.trials}
        write_json_atomic(self.run / STATE_FILE, state)

    def url(self, run_id: Optional[str]) -> Optional[str]:
        if run_id and self.uri.startswith(("http://", "https://")):
            return f"{redact_text(self.uri).rstrip('/')}/#/experiments/{self.experiment_id}/runs/{run_id}"
        return None

    # ------------------------------------------------------------------ trials

    def create_trial(self, record: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if not self.start():
            return None
        with self.guard(f"creating the run of trial {record['trial_id']}"):
            child = self.client.create_run(
                self.experiment_id, run_name=str(record["trial_id"]),
                tags={"mlflow.parentRunId": self.parent_id, "sweeper.role": "trial",
                      "sweeper.trial_id": str(record["trial_id"]), "sweeper.cell_id": str(record.get("cell_id")),
                      "sweeper.run_id": self.run.name})
            run_id = child.info.run_id
            with self.lock:
                self.trials[str(record["trial_id"])] = run_id
                self.save()
            return {"run_id": run_id, "url": self.url(run_id)}
        return None

    def log_trial(self, record: Dict[str, Any], run_id: str) -> None:
        if self.failed or not self.start():
            return
        with self.guard(f"logging trial {record['trial_id']}"):
            from mlflow.entities import Metric, Param

            params, metrics = split_row(record)
            now = _now_ms()
            self.client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()])
            self.client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
            folder = self.run / "trials" / str(record["trial_id"])
            steps = folder / "steps.parquet"
            if steps.exists():
                for chunk in _chunks(step_metrics(steps, now), _BATCH):
                    self.client.log_batch(run_id, metrics=chunk)
            if folder.is_dir():
                self.client.log_artifacts(run_id, str(folder))
            self.client.set_terminated(run_id, status="FINISHED" if record.get("status") == "ok" else "FAILED")

    # ------------------------------------------------------------------ the sweep

    def log_sweep(self, data: Any, analysis: Any, regressions: List[str]) -> None:
        if not self.start():
            return
        with self.guard("logging the sweep's run"):
            from mlflow.entities import Metric, Param

            records = data.records
            params = {"sweep": self.run.parent.name, "run_id": self.run.name, "trials": len(records),
                      "metric": analysis.metric, "baseline_cell": analysis.baseline_id,
                      "axes": ",".join(analysis.axes), "items_label": analysis.workload.items_label,
                      "workload": analysis.workload.name}
            metrics = {"trials": float(len(records)),
                       "failed_trials": float(sum(1 for r in records if r.get("status") != "ok"))}
            tags: Dict[str, str] = {}
            rec = analysis.recommendation
            if rec is not None and rec.cell_id is not None:
                params.update({"recommended_cell_id": rec.cell_id, "recommended_cell": rec.cell,
                               "recommended_objective": rec.objective, "recommended_verdict": rec.verdict})
                tags.update({"sweeper.recommended_cell_id": str(rec.cell_id), "sweeper.recommended_cell": rec.cell})
                metrics.update({"recommended_value": rec.value, "recommended_gain": rec.gain,
                                "recommended_gain_low": rec.gain_low, "recommended_gain_high": rec.gain_high,
                                "baseline_value": rec.baseline_value})
            if rec is not None or analysis.strata:
                from sweeper.analysis.recommend import recommendation_lines

                tags["sweeper.recommendation"] = "\n".join(recommendation_lines(analysis))[:5000]
            if regressions:                                    # the history's alerts, handed to every view
                metrics["regressions"] = float(len(regressions))
                tags["sweeper.regressions"] = "\n".join(regressions)[:5000]
            now = _now_ms()
            logged = self.client.get_run(self.parent_id).data.params   # a resumed run's: MLflow keeps params
            self.client.log_batch(                                     # as first logged; the tags are the latest
                self.parent_id,
                params=[Param(k, _param(v)) for k, v in params.items() if v is not None and k not in logged],
                metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items() if _finite_number(v)])
            for key, value in tags.items():
                self.client.set_tag(self.parent_id, key, value)
            self._log_sweep_files()
            self.save()
            self.client.set_terminated(self.parent_id, status="FINISHED")

    def _log_sweep_files(self) -> None:
        from sweeper.publishers.cells_files import CELLS_BASENAME
        from sweeper.report import FIGURES_DIR

        for name in (f"{CELLS_BASENAME}.parquet", f"{CELLS_BASENAME}.csv", "report.html", "report.md",
                     "summary.parquet", "summary.csv"):
            if (self.run / name).is_file():
                self.client.log_artifact(self.parent_id, str(self.run / name))
        figures = self.run / FIGURES_DIR
        if figures.is_dir():
            self.client.log_artifacts(self.parent_id, str(figures), artifact_path=FIGURES_DIR)


# ---------------------------------------------------------------------- the rows


def split_row(record: Dict[str, Any]):
    """(params, metrics) of a trial: its flat row (sweeper.record.flat_row), figures as metrics."""
    from sweeper.record import flat_row, is_figure

    params: Dict[str, str] = {}
    metrics: Dict[str, float] = {}
    for key, value in flat_row(record).items():
        if key in _NOT_PARAMS:
            continue
        if is_figure(key, record) and _finite_number(value):
            metrics[key] = float(value)
        elif value is not None:         # a text or flag figure, or one of the row's own keys
            params[key] = _param(value)
    return params, metrics


def step_metrics(steps_path: Path, timestamp: int) -> List[Any]:
    """step_s and each phase column at its step number, for the measured steps only."""
    import pandas as pd
    from mlflow.entities import Metric

    from sweeper.analysis.repeats import measured_steps

    steps = pd.read_parquet(steps_path)
    columns = [c for c in steps.columns if c == "step_s" or c.startswith("phase_")]
    out = []
    for row in measured_steps(steps)[["step", *columns]].to_dict("records"):
        for key in columns:
            if _finite_number(row[key]):
                out.append(Metric(key, float(row[key]), timestamp, int(row["step"])))
    return out


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _param(value: Any) -> str:
    text = str(value)
    return text if len(text) <= _PARAM_CHARS else text[:_PARAM_CHARS - 3] + "..."


def _chunks(items: List[Any], size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _one_line(exc: Exception, uri: str = "") -> str:
    text = str(exc).replace(uri, redact_text(uri)) if uri else str(exc)
    text = " ".join(redact_text(text).split())
    return text if len(text) <= 300 else text[:297] + "..."


@contextmanager
def _first_contact(uri: str) -> Iterator[None]:
    """A server that does not answer fails the first request in seconds, not after MLflow's
    default seven retries (about four minutes); the user's own MLFLOW_HTTP_* settings win."""
    if not uri.startswith(("http://", "https://")):
        yield
        return
    wanted = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    added = {k: v for k, v in wanted.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _quiet_mlflow_logs() -> None:
    """The sqlite store's "Creating initial MLflow database tables" lines stay out of the sweep's output."""
    for name in ("mlflow.store.db.utils", "alembic", "alembic.runtime.migration", "mlflow.store.db"):
        logging.getLogger(name).setLevel(logging.WARNING)


# ---------------------------------------------------------------------- the hooks

_trackers: Dict[str, _Tracker] = {}
_trackers_lock = threading.Lock()


def _tracker(run: Path, root: Dict[str, Any]) -> Optional[_Tracker]:
    cfg = settings(root)
    if cfg is None:
        return None
    key = str(Path(run).resolve())
    with _trackers_lock:
        if key not in _trackers:
            _trackers[key] = _Tracker(Path(run), cfg)
        return _trackers[key]


def tracker_id(run: Path, record: Any, root: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """TRACKER_IDS["mlflow"]: creates the trial's nested run before its record is written."""
    tracker = _tracker(run, root)
    if tracker is None:
        return None
    record = record.to_dict() if hasattr(record, "to_dict") else record
    return tracker.create_trial(record)


def on_trial(run: Path, record: Dict[str, Any], root: Dict[str, Any]) -> None:
    """Params, metrics, per-step series and the trial folder, into the run tracker_id created."""
    tracker = _tracker(run, root)
    run_id = ((record.get("trackers") or {}).get("mlflow") or {}).get("run_id")
    if tracker is not None and run_id:
        tracker.log_trial(record, run_id)


def on_sweep_end(end) -> Optional[str]:
    """The parent run: the analysis' per-cell files, the recommendation, the report.
    `end`: a publishers.SweepEnd."""
    tracker = _tracker(end.run, end.root)
    if tracker is not None and end.data.records:
        tracker.log_sweep(end.data, end.analysis, end.alert_lines())
    return None
