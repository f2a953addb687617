"""A run's records as frames, and the run's shape: its cells, axes, workloads and workload view.

Only `load_run` reads files (through sweeper.results); the rest is pure over DataFrames.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from sweeper.analysis.model import Column, RunData, WorkloadView
from sweeper.schema import measurement_keys
from sweeper.spec import DEFAULT_SPEC

FIRST_BATCH: Column = DEFAULT_SPEC.headline[0]      # what records older than specs recorded


def _as_dict(record: Any) -> Dict[str, Any]:
    return record.to_dict() if hasattr(record, "to_dict") else record


def load_run(path, records: Optional[Sequence[Any]] = None) -> RunData:
    """A run folder as frames: a row per trial record (sweeper.record.flat_row) and the steps.
    `records`: the run's trial records when the caller holds them (else read from disk)."""
    from sweeper.results import load, read_records

    records = [_as_dict(r) for r in records] if records is not None else read_records(Path(path))
    summary, steps = load(path, records)
    return RunData(Path(path), summary, steps, records)


def normalise(summary: pd.DataFrame) -> pd.DataFrame:
    """Summary with cell_id, repeat and is_baseline, even from records older than repeats."""
    frame = summary.copy()
    if "cell_id" not in frame.columns or frame["cell_id"].isna().all():
        frame["cell_id"] = frame["trial_id"].astype(str).str.split("-").str[0]
    frame["cell_id"] = frame["cell_id"].fillna(frame["trial_id"].astype(str).str.split("-").str[0])
    frame["repeat"] = frame["repeat"].fillna(0).astype(int) if "repeat" in frame else 0
    frame["is_baseline"] = frame["is_baseline"].fillna(False).astype(bool) if "is_baseline" in frame else False
    return frame


def swept_axes(summary: pd.DataFrame) -> List[str]:
    """The sweep's axes: the summary's dotted columns that are measurement settings
    (data.num_workers, ...; sweeper.schema.roles), in order; first the workload when the run
    holds several (+sweep=playbook)."""
    axes = measurement_keys([str(c) for c in summary.columns if "." in str(c)])
    return ["workload", *axes] if len(run_workloads(summary)) > 1 else axes


def run_workloads(summary: pd.DataFrame) -> List[str]:
    """The workloads a run's trials ran, in order of first appearance."""
    return list(dict.fromkeys(summary["workload"].dropna().astype(str))) if "workload" in summary.columns else []


def _columns(headline: Sequence[Sequence[Any]]) -> tuple:
    return tuple((str(k), str(label), float(scale), int(digits)) for k, label, scale, digits in headline)


def workload_view(records: Sequence[Dict[str, Any]], summary: pd.DataFrame) -> WorkloadView:
    """The records' workload spec; for records older than specs: items, the first-batch time
    when the trials recorded one, and memory decided later from what the cells hold."""
    specs = workload_specs(records)
    if len(specs) > 1:      # items of different kinds, and each workload's first headline figure
        first = [s["headline"][0] for s in specs if s.get("headline")]
        return WorkloadView(",".join(str(s.get("name", "")) for s in specs), "items", _columns(first), "")
    spec = specs[0] if specs else {}
    headline = _columns(spec.get("headline", []))
    if not spec and FIRST_BATCH[0] in summary.columns and summary[FIRST_BATCH[0]].notna().any():
        headline = (FIRST_BATCH,)
    return WorkloadView(spec.get("name", ""), spec.get("items_label") or "items", headline, spec.get("memory", ""))


def workload_specs(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The records' workload specs (`WorkloadSpec.describe()`), one per workload, in order."""
    return list({r["workload_spec"].get("name"): r["workload_spec"] for r in records if r.get("workload_spec")}.values())
