"""Serves a run's per-cell figures to Prometheus (optional; needs prometheus_client).

    python -m sweeper.exporters.prometheus RUN_DIR [--port 9109] [--host 127.0.0.1]

RUN_DIR is a run folder (results/<sweep>/<run-id>) or a sweep folder
(results/<sweep>), in which case the newest run with a summary is served. Every
figure comes from the run's Analysis (sweeper.analysis.run.analyze_run, with the run's
own analysis settings), the same one the terminal, the report and cells.parquet show.
A scrape analyses the folder again only when it changed (a trial folder or the summary
was written since), so a sweep in progress shows its trials as they finish.

Per cell: the median over its finished repeats of each repeat's figure.

    sweeper_cell_items_per_second{sweep, run, cell_id, cell}
    sweeper_cell_step_seconds{sweep, run, cell_id, cell, quantile="0.5"|"0.95"}
    sweeper_baseline_items_per_second{sweep, run}
    sweeper_baseline_step_seconds{sweep, run, quantile}
    sweeper_cell_repeats{sweep, run, cell_id, cell}

With --history DIR (a history store, docs/history.md), per cell series, its latest night:

    sweeper_history_ratio{machine, sweep, cell_id, cell, metric="throughput"|"p95", run}
        how many times worse than the cell's last good night (> 1: worse)
    sweeper_history_alert{machine, sweep, cell_id, cell, metric, run}
        1 when the night raised an alert (sweeper.history.alerts), else 0
"""
from __future__ import annotations

import argparse
import errno
import logging
import math
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple

log = logging.getLogger(__name__)
QUANTILES = (("p50", "0.5"), ("p95", "0.95"))


def latest_run(path: Path) -> Optional[Path]:
    """The run folder itself, or the newest run folder with a summary under a sweep folder."""
    if (path / "summary.parquet").exists():
        return path
    runs = [p for p in path.iterdir() if (p / "summary.parquet").exists()] if path.is_dir() else []
    return max(runs, key=lambda p: (p / "summary.parquet").stat().st_mtime, default=None)


def folder_stamp(run: Path) -> Tuple[int, int]:
    """When the run folder last changed: a trial folder renamed into trials/, or the summary rewritten."""
    def mtime(path: Path) -> int:
        return path.stat().st_mtime_ns if path.exists() else 0
    return mtime(run / "trials"), mtime(run / "summary.parquet")


def analyze(run: Path, n_resamples: int = 2000):
    """The run's Analysis, with the settings it was launched with (multirun.yaml)."""
    from sweeper.analysis.run import analyze_run, run_analysis_config

    return analyze_run(run, run_analysis_config(run), n_resamples=n_resamples)[1]


class RunCollector:
    """A prometheus_client collector over the Analysis of the newest run under `path`;
    analysed again only when the folder changed."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.seen: Optional[tuple] = None      # (run folder, folder_stamp) the analysis is of
        self.analysis = None

    def current(self):
        """(run folder, Analysis) of the newest run, or (None, None)."""
        run = latest_run(self.path)
        if run is None:
            return None, None
        with self.lock:
            key = (run, folder_stamp(run))
            if key != self.seen:
                self.analysis, self.seen = analyze(run), key
            return run, self.analysis

    def describe(self) -> Iterator:
        """The series, empty: the registry asks at registration, before any scrape."""
        yield from _families().values()

    def collect(self) -> Iterator:
        families = _families()
        try:
            run, analysis = self.current()
        except Exception as exc:     # a half-written folder: serve nothing this time, say why
            log.warning("could not analyse %s: %s: %s", self.path, type(exc).__name__, exc)
            run, analysis = None, None
        if analysis is not None:
            _fill(run, analysis, families)
        yield from families.values()


def _families():
    from prometheus_client.core import GaugeMetricFamily

    cell = ["sweep", "run", "cell_id", "cell"]
    return {
        "rate": GaugeMetricFamily("sweeper_cell_items_per_second", "Median over the cell's repeats of each "
                                  "repeat's items/s (its items / its time over its measured steps)", labels=cell),
        "step": GaugeMetricFamily("sweeper_cell_step_seconds", "Median over the cell's repeats of each repeat's "
                                  "step-time quantile", labels=cell + ["quantile"]),
        "base_rate": GaugeMetricFamily("sweeper_baseline_items_per_second", "The baseline cell's items/s",
                                       labels=["sweep", "run"]),
        "base": GaugeMetricFamily("sweeper_baseline_step_seconds", "The baseline cell's step-time quantile",
                                  labels=["sweep", "run", "quantile"]),
        "count": GaugeMetricFamily("sweeper_cell_repeats", "Finished repeats per cell", labels=cell),
    }


def _fill(run: Path, analysis, families) -> None:
    sweep, run_id = run.parent.name, run.name
    for row in analysis.cells.to_dict("records"):
        labels = [sweep, run_id, str(row["cell_id"]), str(row["cell"])]
        baseline = analysis.is_baseline(row["cell_id"])
        families["count"].add_metric(labels, row["repeats"])
        if math.isfinite(row["items_per_s"]):
            families["rate"].add_metric(labels, row["items_per_s"])
            if baseline:
                families["base_rate"].add_metric([sweep, run_id], row["items_per_s"])
        for name, quantile in QUANTILES:
            value = row[name]
            if not math.isfinite(value):
                continue
            families["step"].add_metric(labels + [quantile], value)
            if baseline:
                families["base"].add_metric([sweep, run_id, quantile], value)


class HistoryCollector:
    """Per cell, the latest night's ratio to its last good night and whether it alerted: the
    same assessment as `python -m sweeper.history alerts`, read again when the store changed."""

    def __init__(self, store: Path, settings=None):
        from sweeper.history.detect import Settings

        self.store, self.settings = Path(store), settings or Settings()
        self.lock = threading.Lock()
        self.seen: Optional[tuple] = None
        self.latest = None

    def _stamp(self) -> tuple:
        files = list(self.store.glob("machine=*/sweep=*/*.parquet"))
        return len(files), max((f.stat().st_mtime_ns for f in files), default=0)

    def current(self):
        """The assessment rows of each series' latest night (a DataFrame), or None."""
        from sweeper.history import assess, read

        with self.lock:
            stamp = self._stamp()
            if stamp != self.seen:
                frame = read(self.store)
                assessed = assess(frame, self.settings) if not frame.empty else None
                self.latest = (assessed.groupby(["machine", "sweep", "cell_id", "metric"], sort=False).tail(1)
                               if assessed is not None and not assessed.empty else None)
                self.seen = stamp
            return self.latest

    def describe(self) -> Iterator:
        yield from _history_families().values()

    def collect(self) -> Iterator:
        families = _history_families()
        try:
            latest = self.current()
        except Exception as exc:
            log.warning("could not read the history store %s: %s: %s", self.store, type(exc).__name__, exc)
            latest = None
        for row in (latest.to_dict("records") if latest is not None else []):
            labels = [row["machine"], row["sweep"], row["cell_id"], row["cell"], row["metric"], row["run_id"]]
            families["alert"].add_metric(labels, 1.0 if row["alert"] else 0.0)
            if math.isfinite(row["ratio"]):
                families["ratio"].add_metric(labels, row["ratio"])
        yield from families.values()


def _history_families():
    from prometheus_client.core import GaugeMetricFamily

    labels = ["machine", "sweep", "cell_id", "cell", "metric", "run"]
    return {"ratio": GaugeMetricFamily("sweeper_history_ratio", "Latest night against the cell's last good "
                                       "night: times worse (> 1: worse)", labels=labels),
            "alert": GaugeMetricFamily("sweeper_history_alert", "1 when the cell's latest night passed its last "
                                       "good night by the alert ratio and tested slower", labels=labels)}


def serve(path: Path, port: int, host: str = "127.0.0.1", history: Optional[Path] = None):
    """Starts the HTTP server in a thread; returns (server, thread) for shutdown()."""
    from prometheus_client import start_http_server
    from prometheus_client.core import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(RunCollector(path))
    if history is not None:
        registry.register(HistoryCollector(history))
    return start_http_server(port, addr=host, registry=registry)


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def bind(path: Path, args: argparse.Namespace):
    from sweeper.errors import SweeperError

    try:
        return serve(path, args.port, args.host, args.history)[0]
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):      # the port: taken, or below 1024
            flag, fix = f"--port {args.port}", "choose a free port with --port"
        else:                                                  # the host: unknown, or not this machine's
            flag, fix = f"--host {args.host}", "give an address of this machine with --host (0.0.0.0: all of them)"
        raise SweeperError(f"{flag}: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); {fix}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command behind the one error boundary (sweeper.cli): one line and exit 2 for bad input."""
    from sweeper import cli

    return cli.run(lambda: command(argv))


def command(argv: Optional[Sequence[str]]) -> int:
    from sweeper.cli import Parser, path, text

    parser = Parser(prog="python -m sweeper.exporters.prometheus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=text, help="a run folder, or a sweep folder (its newest run is served)")
    parser.add_argument("--port", type=port_number, default=9109)
    parser.add_argument("--host", type=text, default="127.0.0.1", help="address to listen on (default: this machine only)")
    parser.add_argument("--history", type=path, help="also serve the alerts of this history store (results/history)")
    args = parser.parse_args(argv)
    path = Path(args.run_dir)
    if latest_run(path) is None:
        print(f"error: {path}: holds no run with a summary.parquet; give a run folder or a sweep folder "
              "(results/<sweep>[/<run id>])", file=sys.stderr)
        return 2
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("error: prometheus_client is not installed: pip install prometheus-client", file=sys.stderr)
        return 2
    if args.history is not None and not args.history.is_dir():
        print(f"error: --history {args.history}: no history store there; give <results_dir>/history", file=sys.stderr)
        return 2
    server = bind(path, args)
    print(f"serving {path} at http://{args.host}:{args.port}/metrics", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
