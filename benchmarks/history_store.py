"""What reading a year of nights from the history store costs: `read` and a DuckDB query.

    python benchmarks/history_store.py              # about 30 s on a 2-core machine
    python benchmarks/history_store.py --nights 730 --runs 9

Builds a store in a scratch folder the way sweeps' ends fill it: one file per night, each the
rows of one analysed run (the recorded two-cell run in tests/data/sleepy-a, its date and run id
moved one day per night). Then times, as medians over --runs: `read` of the whole store (every
file opened and cast to the schema, the latest copy of each run kept), `python -m sweeper.history
list` as a user types it (a fresh interpreter, imports included), and the p95-per-cell query
through DuckDB (`pip install 'sweeper[sql]'`), which reads the files in place.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import PYTHON, bench_env, load_average, machine_line, markdown_table, median, run_timed  # noqa: E402

SEED_RUN = Path(__file__).resolve().parent.parent / "tests" / "data" / "sleepy-a"
P95_PER_CELL = ("SELECT cell, PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY p95) AS p95 "
                "FROM history GROUP BY cell ORDER BY cell")
DAY_S = 86400.0


def fill(store: Path, nights: int) -> int:
    """One appended file per night; returns the rows written."""
    from datetime import datetime, timezone

    from sweeper.analysis.run import analyze_run, run_analysis_config
    from sweeper.history.store import append_rows, rows_of_run

    rows = rows_of_run(SEED_RUN, *analyze_run(SEED_RUN, run_analysis_config(SEED_RUN)))
    first = float(rows["started_at"].iloc[0]) - nights * DAY_S
    for night in range(nights):
        started = first + night * DAY_S
        date = datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d")
        append_rows(store, rows.assign(run_id=f"night{night:04d}", started_at=started, date=date))
    return nights * len(rows)


def timed(step: Callable[[], object], runs: int) -> float:
    times: List[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return median(times)


def listed(store: Path) -> None:
    done = run_timed([PYTHON, "-m", "sweeper.history", "--store", str(store), "list"], env=bench_env())
    if done.returncode != 0:
        raise SystemExit(f"history list failed:\n{done.tail()}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    from sweeper.history.store import read

    scratch = Path(tempfile.mkdtemp(prefix="sweeper-history-bench-"))
    try:
        store = scratch / "history"
        rows = fill(store, args.nights)
        files = len(list(store.rglob("*.parquet")))
        table = [("read (in this process)", timed(lambda: read(store), args.runs)),
                 ("`python -m sweeper.history list` (a whole command)", timed(lambda: listed(store), args.runs))]
        try:
            import duckdb  # noqa: F401

            from sweeper.history.sql import run as sql

            table.append(("p95 per cell, DuckDB (in this process)", timed(lambda: sql(store, P95_PER_CELL), args.runs)))
        except ImportError:
            table.append(("p95 per cell, DuckDB: not installed (pip install 'sweeper[sql]')", float("nan")))
        print(f"history store: {files} files, {rows} rows; medians of {args.runs} runs")
        print(f"machine: {machine_line()}; 1-minute load {load_average()}")
        print(markdown_table(["what", "seconds"], table))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
