"""python -m sweeper.history: the runs across nights, each cell's trend, two nights side by side.

    python -m sweeper.history list                       # every run in the store, oldest first
    python -m sweeper.history trend [--metric p95] [--cell CELL]
    python -m sweeper.history diff RUN_A RUN_B           # settings, fingerprint, figures
    python -m sweeper.history alerts                     # regressions of each cell's latest night (exit 1)
    python -m sweeper.history append RUN_DIR [RUN_DIR ...]   # runs from before the history existed
    python -m sweeper.history morning [RUN_DIR ...] [--night NIGHT_DIR] --out morning.html
    python -m sweeper.history sql "SELECT cell, quantile_cont(p95, 0.95) FROM history GROUP BY cell"

The store is --store (default: results/history, where a sweep with the default
results_dir appends). RUN names a run by its run id, or SWEEP/RUN when ids repeat.
Bad arguments: one line on stderr, exit 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from sweeper import cli
from sweeper.errors import SweeperError


class _Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):          # one line, exit 2, as every sweeper error
        message = cli.with_unknown_flags(self, message).replace("the following arguments are required: command",
                                                            f"give a command: {', '.join(COMMANDS)}")
        raise SweeperError(f"{message} (python -m sweeper.history --help)")


def _common(parser: argparse.ArgumentParser, default=None) -> argparse.ArgumentParser:
    """The options of every command. Given after the command too (`list --store DIR`), where their
    default is SUPPRESS: a command's parser would otherwise reset what came before it."""
    keep = {} if default is None else {"default": default}
    parser.add_argument("--store", type=cli.text, **keep, help="the history store (default: results/history; with "
                        "morning --night, the store that night's sweeps appended to)")
    parser.add_argument("--machine", type=cli.text, **keep, help="only this machine (as `list` names it)")
    parser.add_argument("--sweep", type=cli.text, **keep, help="only this sweep")
    parser.add_argument("--alert-ratio", type=float, default=1.15 if default is None else default,
                        help="alert when 1.15x worse (default)")
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = _common(_Parser(prog="python -m sweeper.history", description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter))
    common = _common(argparse.ArgumentParser(add_help=False), default=argparse.SUPPRESS)
    sub = _Subcommands(parser.add_subparsers(dest="command", required=True, parser_class=_Parser), common)
    sub.add_parser("list", help="every run in the store")
    trend = sub.add_parser("trend", help="each cell's figure over nights, with change points and alerts")
    trend.add_argument("--metric", choices=("throughput", "p95"), default="throughput")
    trend.add_argument("--cell", type=cli.text, help="a cell id or its label (e.g. 'num_workers=4')")
    diff = sub.add_parser("diff", help="what differs between two nights: settings, fingerprint, figures")
    diff.add_argument("run_a", type=cli.text)
    diff.add_argument("run_b", type=cli.text)
    sub.add_parser("alerts", help="regressions of each cell's latest night; exit 1 when there are any")
    append = sub.add_parser("append", help="append finished run folders (results/<sweep>/<run-id>)")
    append.add_argument("run_dirs", nargs="+", type=cli.path)
    append.add_argument("--mix-machines", action="store_true",
                        help="append a run whose trials ran on different machines (refused otherwise)")
    morning = sub.add_parser("morning", help="the morning report (HTML) of a night")
    morning.add_argument("run_dirs", nargs="*", type=cli.path, help="the night's run folders (default: latest runs)")
    morning.add_argument("--night", type=cli.path, help="an overnight suite's night folder (its manifest)")
    morning.add_argument("--out", type=cli.path, default=Path("morning.html"))
    sql = sub.add_parser("sql", help="a read-only SQL query over the store (DuckDB; the table is `history`)")
    sql.add_argument("query")
    sql.add_argument("--max-rows", type=cli.count, default=None,
                     help="print at most this many rows (default 10000); a note says when rows were left out")
    return parser


class _Subcommands:
    """add_subparsers' object, each command given the common options as well."""

    def __init__(self, actions, common: argparse.ArgumentParser):
        self.actions, self.common = actions, common

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        return self.actions.add_parser(name, parents=[self.common], **kwargs)


def _settings(args):
    from sweeper.history.detect import Settings

    if not 1 < args.alert_ratio < float("inf"):       # inf: no night could ever raise an alert
        raise SweeperError(f"--alert-ratio must be above 1 and finite (e.g. 1.15), got {args.alert_ratio}")
    return Settings(alert_ratio=args.alert_ratio)


def _store(args) -> Path:
    if args.store:
        from sweeper.schema._base import home_problem

        problem = home_problem(args.store)
        if problem:
            raise SweeperError(f"--store: {problem}")
        return Path(args.store).expanduser()
    if getattr(args, "night", None):
        import json

        from sweeper.storepath import NIGHT_MANIFEST
        from sweeper.history.night import store_of

        path = args.night / NIGHT_MANIFEST
        if path.exists():
            return store_of(args.night, json.loads(path.read_text()))
    return Path("results/history")


def _frame(args):
    from sweeper.history.store import read

    store = _store(args)
    if not store.is_dir():
        raise SweeperError(f"--store {store}: no history store there (a sweep appends to <results_dir>/history; "
                           f"or: python -m sweeper.history append RUN_DIR)")
    frame = read(store, args.machine, args.sweep)
    if frame.empty:
        raise SweeperError(f"--store {store} holds no runs" + (" that match --machine/--sweep"
                                                              if args.machine or args.sweep else ""))
    return frame


def _print(table, title: str = "") -> None:
    from sweeper.analysis.text import text_table

    header, rows = table
    if title:
        print(title)
    print(text_table(header, rows) if rows else "  (none)")


def cmd_list(args) -> int:
    from sweeper.history import store, views

    _print(views.runs_table(store.runs(_frame(args))))
    return 0


def cmd_trend(args) -> int:
    from sweeper.history import detect, views

    frame = _frame(args)
    if args.cell:
        frame = frame[(frame["cell_id"] == args.cell) | (frame["cell"] == args.cell)]
        if frame.empty:
            raise SweeperError(f"--cell {args.cell!r}: no such cell id or label in the store; see `trend`")
    _print(views.trend_table(detect.assess(frame, _settings(args), [args.metric]), args.metric))
    return 0


def cmd_diff(args) -> int:
    from sweeper.history import views

    frame = _frame(args)
    a, b = views.find_run(frame, args.run_a), views.find_run(frame, args.run_b)
    _print(views.settings_changes(a, b), f"settings ({args.run_a} -> {args.run_b}):")
    _print(views.fingerprint_changes(a, b), "\nfingerprint:")
    _print(views.figures_changes(a, b), "\nfigures (median over each cell's repeats):")
    return 0


def cmd_alerts(args) -> int:
    from sweeper.history import alerts, views

    _frame(args)                                     # the store's errors first
    found = alerts(_store(args), None, _settings(args), args.machine, args.sweep)
    _print(views.alerts_table(found), f"{len(found)} regression(s) on each cell's latest night:")
    return 1 if found else 0


def cmd_append(args) -> int:
    from sweeper.history.store import append_run

    for run in args.run_dirs:
        done = append_run(_store(args), run, mix_machines=args.mix_machines)
        print(f"{run}: {done.line()}" + (f" ({len(done.files)} file(s))" if done.files else ""))
    return 0


def cmd_morning(args) -> int:
    from sweeper.history.morning import write_morning

    path = write_morning(_store(args), args.out, run_dirs=args.run_dirs, night=args.night,
                         settings=_settings(args))
    print(f"morning report: {path}")
    return 0


def cmd_sql(args) -> int:
    from sweeper.history.sql import MAX_ROWS, query

    store = _store(args)
    if not store.is_dir():
        raise SweeperError(f"--store {store}: no history store there (a sweep appends to <results_dir>/history)")
    header, rows, more = query(store, args.query, args.max_rows or MAX_ROWS)
    _print((header, rows))
    if more:
        print(f"note: only the first {len(rows)} rows are printed; add LIMIT to the query, or --max-rows N",
              file=sys.stderr)
    return 0


COMMANDS = {"list": cmd_list, "trend": cmd_trend, "diff": cmd_diff, "alerts": cmd_alerts,
            "append": cmd_append, "morning": cmd_morning, "sql": cmd_sql}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command behind the one error boundary (sweeper.cli): one line and exit 2 for bad input."""
    from sweeper import cli

    return cli.run(lambda: command(argv))


def command(argv: Optional[Sequence[str]]) -> int:
    try:
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except SweeperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
