"""The history store no single run can break: one typed schema, a run with no ok trial not
appended, a bad file named once and skipped, and SQL over the files while a sweep appends."""
import json
import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweeper.history import __main__ as cli
from sweeper.history import schema
from sweeper.history.store import append_rows, append_run, machine_of, read, rows_of_run
from sweeper.results import read_records
from tests.conftest import run_sweeper

DATA = Path(__file__).parent / "data"
P95_PER_CELL = ("SELECT cell, PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY p95) AS p95 "
                "FROM history GROUP BY cell ORDER BY cell")


@pytest.fixture(autouse=True)
def fresh_names(monkeypatch):
    monkeypatch.setattr(schema, "_named", set())       # each test sees its own "named once"


@pytest.fixture
def run(tmp_path):
    return Path(shutil.copytree(DATA / "sleepy-a", tmp_path / "sleepy" / "same-a"))


def interrupted(run: Path, status: str = "cancelled") -> Path:
    """The run as an interrupt leaves it: every trial recorded, none finished ok."""
    for path in run.glob("trials/*/trial.json"):
        record = json.loads(path.read_text())
        record.update(status=status, error_type="Interrupted", summary={})
        path.write_text(json.dumps(record))
    for stale in ("summary.parquet", "summary.csv"):
        (run / stale).unlink(missing_ok=True)
    return run


def cli_run(capsys, store, *args):
    code = cli.main(["--store", str(store), *args])
    out, err = capsys.readouterr()
    return code, out, err


def list_and_trend_work(capsys, store, runs):
    code, out, err = cli_run(capsys, store, "list")
    assert code == 0, err
    assert [line.split()[2] for line in out.splitlines()[2:]] == runs
    code, out, more = cli_run(capsys, store, "trend")
    assert code == 0 and "batch_size=8" in out, more
    return err + more


def old_null_partition(store: Path, run: Path) -> Path:
    """What the store held after an interrupted run before it had a schema: its rows as pandas
    guessed their types, every figure column null-typed."""
    rows = rows_of_run(run, *_analysed(run))
    for column in ("items_per_s", "p50", "p95", "p50_low", "p95_high", "repeat_p95"):
        rows[column] = None
    rows = rows.assign(run_id="interrupted", status="cancelled")
    folder = store / f"machine={rows['machine'].iloc[0]}" / "sweep=sleepy"
    folder.mkdir(parents=True)
    table = pa.Table.from_pandas(rows.drop(columns=["machine", "sweep"]), preserve_index=False)
    assert table.schema.field("p95").type == pa.null()
    pq.write_table(table, folder / "2026-11-28-interrupted-0.parquet")
    return folder


def _analysed(run: Path):
    from sweeper.analysis.run import analyze_run, run_analysis_config

    return analyze_run(run, run_analysis_config(run))


def test_a_run_with_no_ok_trial_is_not_appended_and_says_so_in_one_line(run, tmp_path, capsys):
    store = tmp_path / "history"
    other = interrupted(Path(shutil.copytree(run, tmp_path / "sleepy" / "broken")))
    done = append_run(store, other)
    assert done.files == () and not store.exists()
    assert done.line() == f"history: not appended to {store}: no trial of this run finished ok " \
                          "(interrupted or failed): nothing to compare across nights"
    assert append_run(store, run).line() == f"history: appended to {store}"
    list_and_trend_work(capsys, store, ["same-a"])
    code, out, _ = cli_run(capsys, store, "append", str(other))
    assert code == 0 and out.count("\n") == 1 and "not appended" in out


def test_an_interrupted_runs_null_typed_partition_no_longer_breaks_appends_or_reads(run, tmp_path, capsys):
    store = tmp_path / "history"
    old_null_partition(store, run)
    assert append_run(store, run).files                 # this raised ArrowNotImplementedError (double to null)
    frame = read(store)
    assert frame["p95"].dtype == float and sorted(frame["run_id"].unique()) == ["interrupted", "same-a"]
    err = list_and_trend_work(capsys, store, ["interrupted", "same-a"])
    assert err == ""                                     # an old file of the store is read, not skipped


def test_rows_are_cast_to_the_one_schema_even_when_a_column_is_all_null(run, tmp_path):
    rows = rows_of_run(run, *_analysed(run)).assign(p95_low=float("nan"), p95_high=None, extra="dropped")
    done = append_rows(tmp_path / "history", rows)
    written = pq.read_schema(done.files[0])
    assert written.field("p95_low").type == written.field("p95_high").type == pa.float64()
    assert "extra" not in written.names and written.metadata[b"sweeper.history_version"] == b"2"
    assert written.remove_metadata().equals(schema.FILE_SCHEMA.remove_metadata())


def test_corrupt_and_foreign_files_are_named_once_and_skipped(run, tmp_path, capsys):
    store = tmp_path / "history"
    assert append_run(store, run).files
    folder = next(store.glob("machine=*/sweep=sleepy"))
    (folder / "truncated.parquet").write_bytes(next(folder.glob("*.parquet")).read_bytes()[:300])
    pq.write_table(pa.table({"x": [1, 2]}), folder / "foreign.parquet")
    pq.write_table(pa.table({"run_id": ["r"], "cell_id": ["c"], "started_at": ["yesterday"]}),
                   folder / "wrong-type.parquet")
    assert append_rows(store, rows_of_run(run, *_analysed(run)).assign(run_id="same-b")).files
    err = list_and_trend_work(capsys, store, ["same-a", "same-b"])
    lines = err.splitlines()
    assert len(lines) == 3 and all(line.startswith("history: skipped ") for line in lines), err
    assert [name for name in ("truncated", "foreign", "wrong-type") if any(name in line for line in lines)] \
        == ["truncated", "foreign", "wrong-type"]
    assert "not a history file (no run_id, cell_id, started_at column)" in err
    assert "column started_at is string, not double" in err
    _, _, again = cli_run(capsys, store, "list")
    assert again == ""                                   # named once per process


def test_sql_answers_p95_per_cell_while_a_sweep_appends(run, tmp_path, capsys):
    pytest.importorskip("duckdb")
    from sweeper.history.sql import run as sql

    store = tmp_path / "history"
    rows = rows_of_run(run, *_analysed(run))
    old_null_partition(store, run)                      # and an old file of the store beside them
    append_rows(store, rows)
    expected = [(cell, pytest.approx(p95)) for cell, p95 in sorted(zip(rows["cell"], rows["p95"]))]
    written, stop = [], threading.Event()

    def writer():                                        # a sweep's end appending night after night
        night = 0
        while not stop.is_set():
            night += 1
            written.append(append_rows(store, rows.assign(run_id=f"night{night}")).files)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(written) < 2:
            stop.wait(0.01)
        before, answers = len(written), [sql(store, P95_PER_CELL)[1] for _ in range(5)]
        during = len(written) - before
    finally:
        stop.set()
        thread.join()
    assert during > 0                                    # the store grew while the queries ran
    assert all(answer == expected for answer in answers), answers
    assert not list(store.glob(".append-*"))
    code, out, err = cli_run(capsys, store, "sql", P95_PER_CELL)
    assert code == 0 and err == "" and out.splitlines()[0].split() == ["cell", "p95"]
    assert len(out.splitlines()) == 2 + 2


def test_sql_skips_a_corrupt_file_and_bad_queries_are_one_line(run, tmp_path, capsys):
    pytest.importorskip("duckdb")
    store = tmp_path / "history"
    append_run(store, run)
    folder = next(store.glob("machine=*/sweep=sleepy"))
    (folder / "garbage.parquet").write_bytes(b"not parquet at all")
    code, out, err = cli_run(capsys, store, "sql", "SELECT count(*) AS n, min(sweep) AS sweep FROM history")
    assert code == 0 and out.splitlines()[2].split() == ["2", "sleepy"]
    assert err.count("\n") == 1 and "garbage.parquet: unreadable" in err
    code, out, err = cli_run(capsys, store, "sql", "SELECT nothing FROM history")
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: sql: ")


def test_sql_prints_at_most_max_rows_and_says_that_rows_were_left_out(run, tmp_path, capsys):
    """A result of a billion rows is streamed, not fetched: the command ends at once."""
    pytest.importorskip("duckdb")
    store = tmp_path / "history"
    append_run(store, run)
    code, out, err = cli_run(capsys, store, "sql", "SELECT * FROM range(1000000000)", "--max-rows", "3")
    assert code == 0 and out.splitlines()[2:] == ["0", "1", "2"]
    assert err == "note: only the first 3 rows are printed; add LIMIT to the query, or --max-rows N\n"
    code, out, err = cli_run(capsys, store, "sql", "SELECT * FROM range(3)", "--max-rows", "3")
    assert code == 0 and out.splitlines()[2:] == ["0", "1", "2"] and err == ""


def test_sql_without_duckdb_is_a_one_line_hint(run, tmp_path, capsys, monkeypatch):
    import sys

    append_run(tmp_path / "history", run)
    monkeypatch.setitem(sys.modules, "duckdb", None)    # as if the extra were not installed
    code, out, err = cli_run(capsys, tmp_path / "history", "sql", "SELECT 1")
    assert code == 2 and out == ""
    assert err == "error: history sql needs DuckDB: pip install 'sweeper[sql]' (or pip install duckdb)\n"


@pytest.mark.slow
def test_a_sweep_whose_trials_all_fail_leaves_the_next_sweeps_history_working(tmp_path, capsys):
    fast = ["workload.steps=3", "workload.warmup_steps=1", "executor=local", "report.enabled=false"]
    failed = run_sweeper(["workload.target=tests.workloads_for_tests:raises", "run_id=broken", *fast], tmp_path)
    assert failed.returncode == 1
    store = tmp_path / "results" / "history"
    assert failed.stdout.rstrip().splitlines()[-1] == f"history: not appended to {store}: no trial of this run " \
                                                      "finished ok (interrupted or failed): nothing to compare across nights"
    machine = machine_of(read_records(tmp_path / "results" / "single" / "broken"))["machine"]
    garbage = store / f"machine={machine}" / "sweep=single" / "garbage.parquet"     # a file in the sweep's own partition
    garbage.parent.mkdir(parents=True)
    garbage.write_bytes(b"PAR1 but not really")
    good = run_sweeper(["workload.target=tests.workloads_for_tests:quick", "data.batch_size=8,16", "run_id=good",
                        *fast], tmp_path)
    assert good.returncode == 0 and good.stdout.rstrip().splitlines()[-1] == f"history: appended to {store}"
    assert "failed" not in good.stdout.split("results:")[-1]
    assert [line for line in good.stderr.splitlines() if "garbage" in line] == \
        [f"history: skipped {garbage}: unreadable (ArrowInvalid: Could not open Parquet input source it: Parquet "
         f"magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.); "
         f"the other files are read (move it out of the store)"]
    code, out, err = cli_run(capsys, store, "list")
    assert code == 0 and err.count("\n") == 1 and [line.split()[2] for line in out.splitlines()[2:]] == ["good"]
    code, out, err = cli_run(capsys, store, "trend")
    assert code == 0 and err == "" and "batch_size=8" in out          # named once in a process
