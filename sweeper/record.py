"""The trial record: the one contract between the worker side and everything after it.

Built once in the trial's process (or, for a trial that left none, by whoever saw it
end), redacted once where it enters the driver, written as trial.json, and read back
by `from_dict`, which knows every version it can read and names the ones it cannot.
docs/record.md lists the fields.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from sweeper.errors import SweeperError
from sweeper.schema import trial_dict

RECORD_VERSION = 2
READABLE_VERSIONS = (1, 2)     # 1: before workload specs (no workload_spec, attempts optional)


class UnreadableRecord(SweeperError):
    """A record of a version this sweeper cannot read."""


@dataclass
class TrialRecord:
    trial_id: str
    index: int = 0
    cell_id: Optional[str] = None
    repeat: int = 0
    is_baseline: bool = False
    sweep: Optional[str] = None
    run_id: Optional[str] = None
    overrides: List[str] = field(default_factory=list)
    swept: Dict[str, Any] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)          # the trial's own sections (schema.trial_dict)
    resources: Dict[str, Any] = field(default_factory=dict)
    workload_spec: Dict[str, Any] = field(default_factory=dict)   # name, items_label, headline, memory
    status: str = "failed"     # ok, failed, oom, timeout, infeasible, cancelled
    error_type: Optional[str] = None
    error_message: Optional[str] = None
    summary: Dict[str, Any] = field(default_factory=dict)         # the probe's figures over measured steps
    figures: Dict[str, Any] = field(default_factory=dict)         # the workload's own figures
    warnings: List[str] = field(default_factory=list)
    fingerprint: Dict[str, Any] = field(default_factory=dict)     # the machine it ran on
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    pid: Optional[int] = None
    driver_pid: Optional[int] = None
    worker_pid: Optional[int] = None
    attempts: int = 1
    retry_of: Optional[str] = None
    log_tail: Optional[str] = None
    files: List[str] = field(default_factory=list)
    trackers: Dict[str, Any] = field(default_factory=dict)        # e.g. {"wandb": {"run_id", "url"}}: set by publishers
    record_version: int = RECORD_VERSION

    @classmethod
    def for_spec(cls, spec: Dict[str, Any], **values: Any) -> "TrialRecord":
        """A record of the trial `spec` describes (sweeper.plan.Trial.spec), before it ran."""
        config = spec["config"]
        resources = {"num_cpus": spec["num_cpus"], "num_gpus": spec["num_gpus"],
                     "isolation": config.resources.isolation}
        base = dict(trial_id=spec["trial_id"], index=spec["index"], cell_id=spec.get("cell_id"),
                    repeat=spec.get("repeat", 0), is_baseline=spec.get("is_baseline", False),
                    sweep=spec.get("sweep"), run_id=spec.get("run_id"), overrides=list(spec["overrides"]),
                    swept=dict(spec["swept"]), config=trial_dict(config) if dataclasses.is_dataclass(config) else {}, resources=resources,
                    workload_spec=dict(spec.get("workload_spec") or {}), driver_pid=spec.get("driver_pid"),
                    retry_of=spec.get("retry_of"), pid=os.getpid())
        return cls(**{**base, **values})

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TrialRecord":
        version = values.get("record_version", 1)
        if version not in READABLE_VERSIONS:
            raise UnreadableRecord(
                f"trial {values.get('trial_id')!r} has record_version {version}; this sweeper reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}: upgrade sweeper to read it")
        known = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in values.items() if k in known}
        kept["attempts"] = kept.get("attempts") or 1
        return cls(**kept)

    def redacted(self) -> "TrialRecord":
        from sweeper.redact import redact

        return TrialRecord.from_dict(redact(self.to_dict()))


def as_dicts(records) -> List[Dict[str, Any]]:
    """Plain dicts for the views (analysis and publishers read records as dicts)."""
    return [r.to_dict() if isinstance(r, TrialRecord) else r for r in records]


# --------------------------------------------------------------------------- the record as a flat row

# The probe's figures every row has, in display order; a workload's own scalar figures follow.
PROBE_FIGURES = ("items_per_s", "step_p50_s", "step_p95_s", "step_mean_s", "step_cv", "steps")
# The probe's figures a row carries by prefix: phase means, memory maxima.
FIGURE_PREFIXES = ("phase_", "mem_", "gpu_mem_")
# What says which trial a row is and how it ended, not what it measured (nor a swept axis).
IDENTITY = ("trial_id", "cell_id", "repeat", "is_baseline", "status", "workload")
RESOURCES = ("isolation", "num_cpus", "num_gpus", "threads")
PROVENANCE = ("started_at", "error_type", "error_message", "overrides", "pid", "host")


def flat_row(record: Any) -> Dict[str, Any]:
    """The record as one flat row: identity, swept values by dotted key, resources, the probe's
    figures, the workload's own scalar figures, then provenance. summary.parquet, the analysis'
    summary frame and the trackers (W&B config and summary, MLflow params and metrics) read a
    record through this one function."""
    record = record.to_dict() if isinstance(record, TrialRecord) else record
    resources, summary = record.get("resources") or {}, record.get("summary") or {}
    row: Dict[str, Any] = {"trial_id": record["trial_id"], "cell_id": record.get("cell_id"),
                           "repeat": record.get("repeat", 0), "is_baseline": record.get("is_baseline", False),
                           "status": record["status"], "workload": (record.get("workload_spec") or {}).get("name")}
    row.update(record.get("swept") or {})
    row.update({k: resources.get(k) for k in RESOURCES})
    row.update({k: summary.get(k) for k in PROBE_FIGURES})
    row.update({k: v for k, v in summary.items() if k.startswith(FIGURE_PREFIXES)})
    row.update({k: v for k, v in (record.get("figures") or {}).items()
                if k not in row and isinstance(v, (int, float, bool, str))})
    row.update({"started_at": record.get("started_at"), "error_type": record.get("error_type"),
                "error_message": record.get("error_message"), "overrides": " ".join(record.get("overrides") or []),
                "pid": record.get("pid"), "host": (record.get("fingerprint") or {}).get("host")})
    return row


def is_figure(key: str, record: Any) -> bool:
    """A key of `flat_row(record)` that is a measured figure (the probe's or the workload's)."""
    figures = (record.get("figures") if isinstance(record, dict) else record.figures) or {}
    return key in PROBE_FIGURES or key.startswith(FIGURE_PREFIXES) or key in figures
