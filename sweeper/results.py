"""The results folder: its layout, writing a trial, reading it back (also for notebooks).

    results/<sweep>/<run-id>/
        multirun.yaml                       the root config the sweep was launched with (Hydra's)
        summary.parquet, summary.csv        one row per trial (sweeper.record.flat_row)
        trials/<trial-id>/config.yaml       the trial's resolved config
        trials/<trial-id>/steps.parquet     one row per step
        trials/<trial-id>/trial.json        status, figures, fingerprint, overrides
        trials/<trial-id>/trial.log         what the trial printed

A trial folder is built under a temporary name and renamed into place, and
trial.json is its last file, so a folder without it is half-written.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

import yaml

from sweeper.files import json_text, replace_dir, write_bytes_atomic, write_with
from sweeper.record import IDENTITY, PROBE_FIGURES, PROVENANCE, RESOURCES, TrialRecord, UnreadableRecord, as_dicts, \
    flat_row
from sweeper.redact import redact, redact_file, secrets

if TYPE_CHECKING:
    import pandas

TRIAL_JSON = "trial.json"
TRIAL_DIRS = "trials"
MULTIRUN_FILE = "multirun.yaml"                   # what Hydra launched, as it writes it
LEFTOVER_PREFIXES = (".staging-", ".old-")        # write_trial's own half-written folders
SUMMARY_BASENAME = "summary"

# summary.parquet's layout, in its metadata: 2 = a row per TrialRecord, any workload's figures;
# 3 = sweeper.record.flat_row (start time and memory maxima; no analysis columns). 1: no metadata.
SUMMARY_VERSION = 3
_VERSION_KEY = b"sweeper.summary_version"


def run_dir(results_dir: str, sweep: str, run_id: str) -> Path:
    return Path(results_dir).expanduser() / sweep / run_id


def trial_dir(run: Path, trial_id: str) -> Path:
    return run / TRIAL_DIRS / trial_id


def write_trial(run: Path, record: TrialRecord, config: Dict[str, Any], files: Dict[str, bytes]) -> Path:
    """Writes a whole trial folder, replacing any earlier one for the same trial id. The
    record was redacted where it entered the driver; the config and files are redacted here."""
    found = secrets()
    config = redact(config, found)
    files = {name: redact_file(name, data, found) for name, data in files.items()}
    final = trial_dir(run, record.trial_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f"{LEFTOVER_PREFIXES[0]}{record.trial_id}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        (staging / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        for name, data in files.items():
            (staging / name).write_bytes(data)
        record.files = sorted(files)
        (staging / TRIAL_JSON).write_text(json_text(record.to_dict()))
    except BaseException:        # a disk that filled up: give back what this trial took of it
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return replace_dir(staging, final)


_LAST_COLUMNS = PROVENANCE


def summary_frame(records: Iterable[Dict[str, Any]]) -> "pandas.DataFrame":
    """The summary's rows in trial-id order, its columns in one order whatever order the
    trials finished in: the record's own, the swept axes, the probe's, then the workload's
    figures by name, and the error and provenance columns last."""
    import pandas as pd

    rows = sorted((flat_row(r) for r in as_dicts(records)), key=lambda row: str(row["trial_id"]))
    first: List[str] = []
    for row in rows:
        first += [k for k in row if k not in first]
    fixed = [k for k in first if k not in _LAST_COLUMNS and not _is_figure(k, rows)]
    figures = sorted(k for k in first if k not in fixed and k not in _LAST_COLUMNS)
    columns = fixed + figures + [k for k in _LAST_COLUMNS if k in first]
    return _parquet_safe(pd.DataFrame(rows, columns=columns))


_PROBE_COLUMNS = {*PROBE_FIGURES, *IDENTITY, *RESOURCES}


def _is_figure(key: str, rows: List[Dict[str, Any]]) -> bool:
    """A workload figure or a phase column: not the record's own fields, not a swept axis."""
    return key not in _PROBE_COLUMNS and "." not in key


def write_summary(run: Path, records: Iterable[Any]) -> Path:
    """summary.parquet (its layout version in the file's metadata) and summary.csv, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = summary_frame(records)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           _VERSION_KEY: str(SUMMARY_VERSION).encode()})
    run.mkdir(parents=True, exist_ok=True)
    parquet = write_with(run / f"{SUMMARY_BASENAME}.parquet", lambda tmp: pq.write_table(table, tmp))
    write_bytes_atomic(run / f"{SUMMARY_BASENAME}.csv", frame.to_csv(index=False).encode())
    return parquet


def summary_version(path: Path) -> int:
    """The layout version a summary.parquet was written with (1: written before versions)."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    return int(metadata.get(_VERSION_KEY, b"1"))


def _parquet_safe(frame):
    """Columns that mix types (a swept value of None and 2) become text, which parquet accepts."""
    for column in frame.columns:
        kinds = {type(v) for v in frame[column] if v is not None}
        if frame[column].dtype == object and len(kinds) > 1:
            frame[column] = frame[column].map(lambda v: None if v is None else str(v))
    return frame


def read_records(run: Path) -> List[Dict[str, Any]]:
    """Every complete trial record in a run folder (half-written folders are skipped)."""
    trials = Path(run) / TRIAL_DIRS
    if not trials.is_dir():
        return []
    out = []
    for folder in sorted(trials.iterdir()):
        path = folder / TRIAL_JSON
        if folder.name.startswith(".") or not path.exists():
            continue
        out.append(read_record(path))
    return out


def read_record(path: Path) -> Dict[str, Any]:
    """One trial.json; a damaged one is named in one line (UnreadableRecord), not a traceback."""
    try:
        return TrialRecord.from_dict(json.loads(path.read_text())).to_dict()
    except UnreadableRecord:
        raise
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise UnreadableRecord(f"{path}: not a complete trial record ({type(exc).__name__}); restore it, or remove "
                               f"its trial folder (resume=latest then runs that trial again)") from None



def load(path: str | os.PathLike, records: Optional[List[Dict[str, Any]]] = None
         ) -> Tuple["pandas.DataFrame", "pandas.DataFrame"]:
    """(summary, steps) of a run folder as pandas DataFrames; steps has a trial_id column.
    The summary is built from the trial records, the durable truth (summary.parquet is their
    view for notebooks, not read back). `records`: the run's records, when the caller holds them."""
    import pandas as pd

    run = Path(path)
    records = read_records(run) if records is None else as_dicts(records)
    frames = []
    for record in records:
        steps = trial_dir(run, record["trial_id"]) / "steps.parquet"
        if steps.exists():
            frames.append(pd.read_parquet(steps).assign(trial_id=record["trial_id"]))
    steps = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return summary_frame(records), steps


def launch_config(run: Path) -> Dict[str, Any]:
    """The resolved root config the run was launched with (Hydra's multirun.yaml), {} without one."""
    path = Path(run) / MULTIRUN_FILE
    if not path.exists():
        return {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)       # libyaml: 10x faster on Hydra's long file
    return yaml.load(path.read_text(), Loader=loader) or {}


def flatten(values: Any, prefix: str = "") -> Dict[str, Any]:
    """{"data": {"seq_len": 1024}} -> {"data.seq_len": 1024}; an empty section is kept as {}."""
    if not isinstance(values, dict):
        return {prefix.rstrip("."): values} if prefix else {}
    out: Dict[str, Any] = {}
    for key, value in values.items():
        out.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict) and value else
                   {f"{prefix}{key}": value})
    return out
