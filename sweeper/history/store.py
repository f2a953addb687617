"""The history store: one row per cell of every finished run, across nights, as partitioned parquet.

    root/machine=<machine_id>/sweep=<sweep>/<date>-<run_id>-<uuid>.parquet

Append-only truth. Each append writes one new file (a unique name, written under a dotted
temporary folder and renamed into place, so a reader never sees half a file), so any number
of writers can append at once: two hosts of a cluster, a cron night and a hand-run
`append`. Nothing is ever rewritten. A run appended twice is two files; `read` keeps the
latest copy of each (machine, sweep, run, cell).

Each row is cast to one typed, versioned schema (sweeper/history/schema.py) when written, and
each file again when read, one file at a time: a file that cannot be read is named once and
skipped. A run with no trial that finished ok is not appended (`Appended.line` says so).
Read with pyarrow and pandas (`read`), or with SQL: `python -m sweeper.history sql` runs DuckDB
over the files in place (sweeper/history/sql.py).

A row's figures are the run's one Analysis (`sweeper.analysis.run.analyze_run`): the
cell's items_per_s / p50 / p95 with intervals, and the per-repeat values its verdicts were
tested on (lists), so a later night can be tested against this one without the run folder.
So are its decisions: the cell's verdict against its stratum's baseline on the run's metric
(with the ratio's interval and the Holm-adjusted p), and the run's recommendation, as every
view words it. The morning report reads them here; nothing recomputes a verdict.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import pandas as pd

from sweeper.errors import SweeperError

# what each row is keyed by: the fingerprint's host, GPU model and UUIDs, and driver
MACHINE_KEYS = ("host", "gpu_name", "gpu_uuids", "driver")
# what makes a series: the hardware. The driver is a column of every row, not part of the series:
# a driver update is a change the history must catch, so it cannot start a new series.
HARDWARE_KEYS = ("host", "gpu_name", "gpu_uuids")
FIGURES = ("items_per_s", "p50", "p95")
INTERVALS = tuple(f"{f}{end}" for f in FIGURES for end in ("_low", "_high"))
REPEAT_LISTS = {f"repeat_{f}": f for f in FIGURES}        # history column -> repeat-table column
KEY = ["machine", "sweep", "run_id", "cell_id"]


# --------------------------------------------------------------------------- rows of a run


def machine_of(records: Iterable[Dict[str, Any]]) -> Dict[str, str]:
    """The machine the run's trials ran on: its hosts, GPU model(s), GPU UUIDs and driver(s), as
    text, and `machine`: the host with a short id over its hardware (not the driver). Several
    hosts (a Ray cluster) or GPUs make one machine."""
    seen: Dict[str, set] = {k: set() for k in MACHINE_KEYS}
    for record in records:
        fp = record.get("fingerprint") or {}
        for key in MACHINE_KEYS:
            value = fp.get(key) if key != "gpu_uuids" else (fp.get("gpu_uuids") or [fp.get("gpu_uuid")])
            for v in value if isinstance(value, list) else [value]:
                if v:
                    seen[key].add(str(v))
    fields = {k: ",".join(sorted(v)) for k, v in seen.items()}
    hardware = {k: fields[k] for k in HARDWARE_KEYS}
    digest = hashlib.sha1(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:10]
    fields["machine"] = f"{fields['host'] or 'unknown'}-{digest}"
    return fields


def flat_settings(values: Dict[str, Any]) -> Dict[str, str]:
    """{dotted key: value as text} of a resolved config, without Hydra's own section. Which of
    them count as a change between nights is the views' question (sweeper.schema.roles)."""
    from sweeper.results import flatten

    return {k: json.dumps(v, default=str) if isinstance(v, (list, tuple)) else str(v)
            for k, v in flatten({k: v for k, v in values.items() if k != "hydra"}).items()
            if v != {}}


def run_settings(run: Path) -> Dict[str, str]:
    """The settings the run was launched with (its multirun.yaml), flat."""
    from sweeper.results import launch_config

    return flat_settings(launch_config(run))


def _started(records: List[Dict[str, Any]]) -> float:
    times = [r["started_at"] for r in records if isinstance(r.get("started_at"), (int, float))]
    return float(min(times)) if times else time.time()


def _tool_version(records: List[Dict[str, Any]]) -> str:
    from sweeper import __version__

    commit = next(((r.get("fingerprint") or {}).get("git_commit") for r in records
                   if (r.get("fingerprint") or {}).get("git_commit")), "unknown")
    return f"{__version__}+{str(commit)[:12]}"


def _repeat_lists(analysis, cell_id: str) -> Dict[str, List[float]]:
    repeats = analysis.repeats[analysis.repeats["cell_id"] == cell_id]
    return {name: [float(v) for v in repeats[column]] for name, column in REPEAT_LISTS.items()}


def rows_of_run(run: Path, data, analysis) -> pd.DataFrame:
    """One history row per cell of an analysed run (RunData, Analysis)."""
    records = data.records
    if analysis is None or analysis.cells.empty or not records:
        return pd.DataFrame()
    first = records[0]
    started = _started(records)
    machine = machine_of(records)
    shared = {**machine, "sweep": str(first.get("sweep") or Path(run).parent.name),
              "run_id": str(first.get("run_id") or Path(run).name), "run_dir": str(Path(run).resolve()),
              "date": datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d"),
              "started_at": started, "tool_version": _tool_version(records),
              "metric": analysis.metric, "appended_at": time.time(),
              "fingerprint": json.dumps(first.get("fingerprint") or {}, sort_keys=True, default=str),
              "settings": json.dumps(run_settings(run), sort_keys=True),
              "recommendation": recommendation_text(analysis)}
    decisions = decisions_of(analysis)
    rows = []
    for cell in analysis.cells.to_dict("records"):
        swept = {a: _plain(cell.get(a)) for a in analysis.axes}
        rows.append({**shared, "cell_id": str(cell["cell_id"]), "cell": str(cell["cell"]),
                     "swept": json.dumps(swept, sort_keys=True, default=str),
                     "is_baseline": bool(cell.get("is_baseline")), "status": str(cell["status"]),
                     "repeats": int(cell["repeats"]), "failed": int(cell.get("failed") or 0),
                     **{f: _number(cell.get(f)) for f in (*FIGURES, *INTERVALS)},
                     **_repeat_lists(analysis, cell["cell_id"]), **decisions.get(str(cell["cell_id"]), {})})
    return pd.DataFrame(rows)


# history column -> the verdict table's column ({m}: the run's metric, analysis.metric)
DECISION_COLUMNS = {"verdict_ratio": "{m}_ratio", "verdict_ratio_low": "{m}_ratio_low",
                    "verdict_ratio_high": "{m}_ratio_high", "verdict_p": "{m}_p_adj"}


def decisions_of(analysis) -> Dict[str, Dict[str, Any]]:
    """cell_id -> its stratum and its decision on the run's metric, as the Analysis' verdict
    table holds them: the verdict, the ratio to its baseline with its interval (95%; repeats=auto:
    the sequential rule's repeated interval), adjusted p,
    and why it got no more repeats (repeats=auto; None for a run of fixed repeats)."""
    from sweeper.analysis.model import STOPPED, STRATUM

    if analysis.verdicts.empty:
        return {}
    out = {}
    for row in analysis.verdicts.to_dict("records"):
        figures = {name: _number(row.get(column.format(m=analysis.metric))) for name, column in DECISION_COLUMNS.items()}
        out[str(row["cell_id"])] = {"verdict": str(row.get("verdict") or ""), "stratum": str(row.get(STRATUM) or ""),
                                    "stopped": row.get(STOPPED), **figures}
    return out


def recommendation_text(analysis) -> str:
    """The run's recommendation, lines as every view prints them (recommend.recommendation_lines)."""
    from sweeper.analysis.recommend import recommendation_lines

    return "\n".join(recommendation_lines(analysis))


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Appended:
    """What an append did: the files it wrote, or why it wrote none. The caller prints `line()`."""
    store: Path
    files: Tuple[Path, ...] = ()
    reason: str = ""

    def line(self) -> str:
        if self.files:
            return f"history: appended to {self.store}"
        return f"history: not appended to {self.store}: {self.reason}"


NO_OK_TRIAL = "no trial of this run finished ok (interrupted or failed): nothing to compare across nights"


def append_rows(root: Path, rows: pd.DataFrame) -> Appended:
    """Appends rows to the store (one new file per machine and sweep), cast to the store's schema."""
    import pyarrow.dataset as ds

    from sweeper.history import schema

    root = Path(root).expanduser()
    if rows.empty or not (rows["status"] == "ok").any():
        return Appended(root, reason=NO_OK_TRIAL)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".append-{uuid.uuid4().hex}"      # dotted: readers skip it
    first = rows.iloc[0]
    name = f"{first['date']}-{_safe(first['run_id'])}-{uuid.uuid4().hex[:8]}-{{i}}.parquet"
    try:
        ds.write_dataset(schema.table_of(rows), staging, format="parquet", basename_template=name,
                         partitioning=ds.partitioning(schema.PARTITIONS, flavor="hive"))
        return Appended(root, tuple(_move_in(path, staging, root) for path in sorted(staging.rglob("*.parquet"))))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_in(path: Path, staging: Path, root: Path) -> Path:
    final = root / path.relative_to(staging)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, final)            # atomic within one file system: whole file or none
    return final


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(text))[:60]


def append_run(root: Path, run: Path, data=None, analysis=None, mix_machines: bool = False) -> Appended:
    """Appends an analysed run; analyses it (with its own settings) when not given."""
    run = Path(run)
    if analysis is None:
        from sweeper.analysis.run import analyze_run, run_analysis_config
        from sweeper.results import read_records

        if not (run / "trials").is_dir():
            raise SweeperError(f"{run} is not a run folder (no trials/ in it): give results/<sweep>/<run-id>")
        records = read_records(run)
        if not records:                      # nothing finished: there is nothing to analyse either
            return Appended(Path(root).expanduser(), reason=NO_OK_TRIAL)
        data, analysis = analyze_run(run, run_analysis_config(run), records=records)
    if not any(r.get("status") == "ok" for r in data.records):
        return Appended(Path(root).expanduser(), reason=NO_OK_TRIAL)
    mixed = machines_refused(data.records, mix_machines)
    if mixed:
        raise SweeperError(f"{run}: not appended: {mixed}")
    return append_rows(root, rows_of_run(run, data, analysis))


def machines_refused(records: List[Dict[str, Any]], mix_machines: bool = False) -> str:
    """Why a run is not appended when its trials ran on different machines (a series of nights
    is one machine's; sweeper.fingerprint names the fields); "" when they did not, or `mix_machines`."""
    from sweeper.fingerprint import mismatch_line

    mixed = "" if mix_machines else mismatch_line(records)
    return f"its trials ran on different machines: {mixed} (--mix-machines, or history.mix_machines=true, " \
           f"appends it)" if mixed else ""


# --------------------------------------------------------------------------- reading


def read(root: Path, machine: Optional[str] = None, sweep: Optional[str] = None) -> pd.DataFrame:
    """Every row of the store (latest copy of each machine/sweep/run/cell), oldest night first.
    Each file is read and cast on its own: one that cannot be is named once and skipped."""
    import pyarrow as pa

    from sweeper.history import schema

    root = Path(root).expanduser()
    tables = []
    for path in schema.files(root, machine, sweep) if root.is_dir() else []:
        try:
            tables.append(schema.read_file(path, root))
        except schema.UnusableFile as exc:
            schema.skipped(path, str(exc))
    if not tables:
        return pd.DataFrame(columns=[*KEY, "started_at"])
    frame = pa.concat_tables(tables).to_pandas()
    frame = frame.sort_values(["started_at", "appended_at"], kind="stable")
    return frame.drop_duplicates(KEY, keep="last").reset_index(drop=True)


def runs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run (a night of a sweep on a machine), oldest first."""
    if frame.empty:
        return pd.DataFrame(columns=["machine", "sweep", "run_id", "date", "cells", "repeats"])
    grouped = frame.groupby(["machine", "sweep", "run_id"], sort=False)
    out = grouped.agg(date=("date", "first"), started_at=("started_at", "first"), host=("host", "first"),
                      gpu_name=("gpu_name", "first"), driver=("driver", "first"),
                      tool_version=("tool_version", "first"), cells=("cell_id", "nunique"),
                      repeats=("repeats", "sum"), failed=("failed", "sum")).reset_index()
    return out.sort_values("started_at", kind="stable").reset_index(drop=True)
