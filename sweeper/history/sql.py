"""SQL over the history store: DuckDB reading the parquet files in place.

    python -m sweeper.history sql "SELECT cell, PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY p95)
                                   FROM history GROUP BY cell"

The store's files are the table `history` (one row per cell per night, the columns of
sweeper/history/schema.py, plus `machine` and `sweep` from the folders). DuckDB runs in
memory: there is no database file, so there is no lock, and sweeps go on appending while a
query runs (a query sees the files that were there when it started). A file that cannot be
read is named once and left out, as `read` does. DuckDB is an extra: pip install 'sweeper[sql]'.

The query reads the history and nothing else: the files are read into memory first, then
DuckDB's own settings shut every file, network and extension out (enable_external_access off,
then lock_configuration on, which refuses the SET that would undo it). So COPY ... TO, ATTACH,
INSTALL/LOAD and read_csv('/etc/...') are refused in one line. DuckDB's allowed_paths would
have kept the files in place, but it lets a query write to them too (COPY ... TO one of them).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, List, Tuple

from sweeper.errors import SweeperError

VIEW = "history"
MISSING = "history sql needs DuckDB: pip install 'sweeper[sql]' (or pip install duckdb)"


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise SweeperError(MISSING) from None
    return duckdb


# run in this order: the last two shut out everything the first did not read
SHUT_OUT = ("SET autoinstall_known_extensions = false", "SET autoload_known_extensions = false",
            "SET enable_external_access = false", "SET lock_configuration = true")
READ_ONLY = (f"the history's SQL is read-only and reads the table {VIEW}, nothing else (no files, COPY ... TO, "
             f"ATTACH, INSTALL, LOAD or SET); query {VIEW}, and redirect the output to keep it")


def connect(root: Path):
    """An in-memory DuckDB connection holding the store's usable files as the table `history`,
    with no access to anything else."""
    from sweeper.history import schema

    duckdb = _duckdb()

    paths = schema.usable(schema.files(root))
    if not paths:
        raise SweeperError(f"--store {root} holds no history files to query")
    con = duckdb.connect(":memory:")
    listed = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    con.execute(f"CREATE TABLE {VIEW} AS SELECT * FROM read_parquet([{listed}], hive_partitioning=true, "
                f"union_by_name=true, hive_types={{'machine': VARCHAR, 'sweep': VARCHAR}})")
    for statement in SHUT_OUT:
        con.execute(statement)
    return con


def _refused(duckdb, exc: Exception) -> bool:
    """Whether DuckDB refused the query for reaching outside the history (or changing its settings)."""
    return isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in str(exc)


MAX_ROWS = 10_000        # a result's rows fetched at most (`--max-rows`): a cross join or range(1e10) streams, unread


def run(root: Path, sql: str, max_rows: int = MAX_ROWS) -> Tuple[List[str], List[tuple], bool]:
    """(column names, the first `max_rows` result rows, whether there were more) of a query over
    the store; a bad query is one line. Only the rows kept are fetched: DuckDB streams the rest."""
    duckdb = _duckdb()
    con = connect(Path(root))
    try:
        cursor = con.execute(sql)
        if cursor is None:                       # DuckDB's answer to "" or a lone comment
            raise SweeperError(f'sql: no statement in {sql!r}; give one, e.g. "SELECT * FROM {VIEW} LIMIT 5"')
        found = cursor.fetchmany(max_rows + 1)
        return [d[0] for d in cursor.description or []], found[:max_rows], len(found) > max_rows
    except duckdb.Error as exc:
        said = str(exc).strip().splitlines()[0]
        if _refused(duckdb, exc):
            raise SweeperError(f"sql: {said}; {READ_ONLY}") from None
        raise SweeperError(f"sql: {said}") from None
    finally:
        con.close()


def query(root: Path, sql: str, max_rows: int = MAX_ROWS) -> Tuple[List[str], List[List[str]], bool]:
    """(header, rows as text, whether rows were left out) of a query, for the terminal."""
    header, found, more = run(root, sql, max_rows)
    return header, [[_text(v) for v in row] for row in found], more


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return str(value)
