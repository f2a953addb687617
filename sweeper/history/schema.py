"""The history store's one schema, and reading its files one at a time.

Every row is cast to SCHEMA when it is written, so a column that is null on one night (a run
whose figures are all missing) is still a float column in that night's file, and every file
is cast to it again when read. A file that cannot be read or cast (truncated, not parquet,
another tool's table, a newer schema) is named once on stderr and skipped: no single file
stops an append, a read or a query of the others.

Version 1 is the store before this schema (columns as pandas guessed them); its files read
as version 2 with the version column filled in. Columns added since (each cell's verdict and
the run's recommendation) read null in the files written before them: an older reader drops
them, so adding one needs no new version.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, List, Optional, Set
from urllib.parse import unquote

import pyarrow as pa

VERSION = 2
VERSION_COLUMN = "history_version"
PARTITIONS = pa.schema([("machine", pa.string()), ("sweep", pa.string())])

_TEXT = ("host", "gpu_name", "gpu_uuids", "driver", "run_id", "run_dir", "date", "tool_version", "metric",
         "fingerprint", "settings", "cell_id", "cell", "swept", "status",
         "stratum", "verdict", "stopped", "recommendation")   # the run's decisions (store.decisions_of)
_FLOAT = ("started_at", "appended_at", "items_per_s", "p50", "p95", "items_per_s_low", "items_per_s_high",
          "p50_low", "p50_high", "p95_low", "p95_high", "verdict_ratio", "verdict_ratio_low", "verdict_ratio_high",
          "verdict_p")
_LISTS = ("repeat_items_per_s", "repeat_p50", "repeat_p95")
# a night's row in a file (machine and sweep are its folders)
FILE_SCHEMA = pa.schema([*[(c, pa.string()) for c in _TEXT], *[(c, pa.float64()) for c in _FLOAT],
                         ("is_baseline", pa.bool_()), ("repeats", pa.int64()), ("failed", pa.int64()),
                         *[(c, pa.list_(pa.float64())) for c in _LISTS], (VERSION_COLUMN, pa.int32())],
                        metadata={b"sweeper.history_version": str(VERSION).encode()})
SCHEMA = pa.schema([*PARTITIONS, *FILE_SCHEMA], metadata=FILE_SCHEMA.metadata)
REQUIRED = ("run_id", "cell_id", "started_at")      # without these a file is not a history file

_named: Set[str] = set()


class UnusableFile(Exception):
    """A file in the store that is not a readable history file of this version or older."""


def table_of(frame) -> pa.Table:
    """Rows (a DataFrame) cast to SCHEMA: missing columns null, extra columns dropped."""
    frame = frame.assign(**{VERSION_COLUMN: VERSION})
    columns = {f.name: frame[f.name] if f.name in frame.columns else None for f in SCHEMA}
    arrays = [pa.array([None] * len(frame), f.type) if columns[f.name] is None
              else pa.Array.from_pandas(columns[f.name], type=f.type) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def check_schema(found: pa.Schema) -> None:
    """Raises UnusableFile unless a file of this schema can be cast to FILE_SCHEMA."""
    version = int((found.metadata or {}).get(b"sweeper.history_version", b"1"))
    if version > VERSION:
        raise UnusableFile(f"written by a newer sweeper (history version {version}; this one reads {VERSION})")
    missing = [c for c in REQUIRED if c not in found.names]
    if missing:
        raise UnusableFile(f"not a history file (no {', '.join(missing)} column)")
    for field in FILE_SCHEMA:
        if field.name in found.names and not _castable(found.field(field.name).type, field.type):
            raise UnusableFile(f"column {field.name} is {found.field(field.name).type}, not {field.type}")


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Of the same kind (text, number, flag, list) or all null: what a cast keeps meaning."""
    t = pa.types
    if source == target or t.is_null(source):
        return True
    if t.is_list(target):
        return (t.is_list(source) or t.is_large_list(source)) and _castable(source.value_type, target.value_type)
    kinds = ((t.is_string, lambda x: t.is_string(x) or t.is_large_string(x)),
             (t.is_boolean, t.is_boolean),
             (lambda x: t.is_floating(x) or t.is_integer(x), lambda x: t.is_floating(x) or t.is_integer(x)))
    return any(is_target(target) and is_source(source) for is_target, is_source in kinds)


def conform(table: pa.Table, partitions: dict) -> pa.Table:
    """A file's table cast to SCHEMA, with its folders' machine and sweep."""
    check_schema(table.schema)
    arrays = []
    for field in SCHEMA:
        if field.name in partitions:
            arrays.append(pa.array([partitions[field.name]] * len(table), field.type))
        elif field.name in table.column_names:
            arrays.append(table[field.name].cast(field.type))
        else:
            fill = 1 if field.name == VERSION_COLUMN else None
            arrays.append(pa.array([fill] * len(table), field.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def partitions_of(path: Path, root: Path) -> dict:
    """{"machine": ..., "sweep": ...} from a file's folders (hive style, URI-encoded)."""
    parts = dict(p.split("=", 1) for p in path.relative_to(root).parts[:-1] if "=" in p)
    return {k: unquote(parts.get(k, "")) for k in PARTITIONS.names}


def files(root: Path, machine: Optional[str] = None, sweep: Optional[str] = None) -> List[Path]:
    """The store's parquet files, oldest name first; a writer's dotted staging folder is not read."""
    found = []
    for path in sorted(Path(root).glob("machine=*/sweep=*/*.parquet")):
        where = partitions_of(path, root)
        if path.name.startswith(".") or (machine and where["machine"] != machine) or \
                (sweep and where["sweep"] != sweep):
            continue
        found.append(path)
    return found


def read_file(path: Path, root: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, partitioning=None)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UnusableFile(f"unreadable ({type(exc).__name__}: {_first_line(exc, path)})") from None
    try:
        return conform(table, partitions_of(path, root))
    except (pa.ArrowException, ValueError) as exc:
        raise UnusableFile(f"cannot be read as a history file ({_first_line(exc, path)})") from None


def usable(paths: Iterable[Path]) -> List[Path]:
    """The files whose footer and schema are fine (for a query that reads them in place)."""
    import pyarrow.parquet as pq

    good = []
    for path in paths:
        try:
            check_schema(pq.read_schema(path))
        except UnusableFile as exc:
            skipped(path, str(exc))
            continue
        except (pa.ArrowException, OSError, ValueError) as exc:
            skipped(path, f"unreadable ({type(exc).__name__}: {_first_line(exc, path)})")
            continue
        good.append(path)
    return good


def skipped(path: Path, why: str) -> None:
    """One line on stderr per bad file and process: named once, never an error."""
    if str(path) in _named:
        return
    _named.add(str(path))
    print(f"history: skipped {path}: {why}; the other files are read (move it out of the store)",
          file=sys.stderr)


def _first_line(exc: BaseException, path: Path) -> str:
    """The error's first line, without the file's path (the warning names it once already)."""
    text = str(exc).replace(f"'{path}'", "it").replace(str(path), "it").strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
