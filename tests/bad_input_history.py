"""The bad-input cases of python -m sweeper.history: damaged stores, unknown runs and commands, its SQL."""
from tests import bad_input_files as files
from tests.bad_input_base import BAD, OK, Case, history_with, run_with, store_with_garbage, with_run

CASES = [
    Case("history-list-null-partition", "2", ("--store", "{HIST}", "list"), OK, lines=0, command="history",
         setup=history_with("null")),
    Case("history-trend-null-partition", "2", ("--store", "{HIST}", "trend"), OK, lines=0, command="history",
         setup=history_with("null")),
    Case("history-list-damaged-partition", "9g", ("--store", "{HIST}", "list"), OK, "broken-0.parquet",
         command="history", setup=history_with("garbage")),
    Case("history-trend-damaged-partition", "9g", ("--store", "{HIST}", "trend"), OK, "broken-0.parquet",
         command="history", setup=history_with("garbage")),
    Case("history-append-damaged-trial-json", "9g", ("--store", "{HIST}", "append", "{RUN}"), BAD, "trial.json",
         command="history", setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("history-append-into-damaged-store", "2, 9g", ("--store", "{R}/h2", "append", "{RUN}"), OK, lines=0,
         command="history", setup=store_with_garbage),
    Case("history-no-store", "9g", ("--store", "{T}/nostore", "list"), BAD, "--store", command="history"),
    Case("history-alert-ratio-infinite", "audit", ("--store", "{HIST}", "trend", "--alert-ratio", "inf"), BAD,
         "--alert-ratio must be above 1 and finite", command="history", setup=lambda ctx: ctx.copy_run()),  # no alert
    Case("history-store-of-an-unknown-user", "audit", ("--store", "~nosuchuser/h", "list"), BAD,
         "--store: ~nosuchuser is no user", command="history"),
    Case("history-unknown-command", "9g", ("nosuch",), BAD, "nosuch", command="history"),
    Case("history-diff-unknown-runs", "9g", ("--store", "{HIST}", "diff", "a", "b"), BAD, "a",
         command="history", setup=with_run),
    Case("history-store-after-the-command", "audit", ("list", "--store", "{HIST}"), OK, lines=0, command="history",
         setup=with_run),
    Case("history-sql-copy-to", "audit", ("--store", "{HIST}", "sql", "COPY (SELECT 1) TO '{T}/out.csv'"), BAD,
         "read-only", command="history", setup=with_run),
    Case("history-sql-reads-a-file", "audit", ("--store", "{HIST}", "sql", "SELECT * FROM read_csv('/etc/passwd')"),
         BAD, "read-only", command="history", setup=with_run),
    Case("history-sql-attach", "audit", ("--store", "{HIST}", "sql", "ATTACH '{T}/db.duckdb' AS db"), BAD,
         "read-only", command="history", setup=with_run),
    Case("history-sql-install", "audit", ("--store", "{HIST}", "sql", "INSTALL httpfs"), BAD, "read-only",
         command="history", setup=with_run),
    Case("history-sql-history-file-overwritten", "audit", ("--store", "{HIST}", "sql", "COPY (SELECT 1 AS a) TO "
         "'{PART}' (USE_TMP_FILE false)"), BAD, "read-only", command="history", setup=with_run),
    Case("history-unknown-flag-alone", "audit", ("--bogus",), BAD, "--bogus", command="history"),
    Case("history-no-command", "audit", (), BAD, "give a command: list", command="history"),
    Case("history-store-empty", "audit", ("--store", "", "list"), BAD, "--store: is empty", command="history",
         setup=with_run),                          # read as not given: the default store was listed
    Case("history-cell-empty", "audit", ("--store", "{HIST}", "trend", "--cell", ""), BAD, "--cell: is empty",
         command="history", setup=with_run),
    Case("history-morning-out-a-dot", "audit", ("--store", "{HIST}", "morning", "--out", "."), BAD,
         ".: Is a directory", command="history", setup=with_run),
    Case("history-sql-empty", "9g", ("--store", "{HIST}", "sql", ""), BAD, "sql", command="history", setup=with_run),
    Case("history-sql-max-rows-zero", "audit", ("--store", "{HIST}", "sql", "SELECT 1", "--max-rows", "0"), BAD,
         "--max-rows: '0' is not a whole number", command="history", setup=with_run),
    Case("history-sql-max-rows-huge", "audit", ("--store", "{HIST}", "sql", "SELECT 1", "--max-rows", "9" * 23), BAD,
         "--max-rows", command="history", setup=with_run),           # was a TypeError in fetchmany, exit 70
    Case("history-append-a-run-with-no-record", "audit", ("--store", "{R}/h3", "append", "{T}/norun"), OK, lines=0,
         command="history", setup=lambda ctx: (ctx.T / "norun" / "trials" / "x").mkdir(parents=True)),  # was a KeyError
]
