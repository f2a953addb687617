"""Serves a run's latest p50/p95 step time per cell to Prometheus (optional; needs prometheus_client).

    python -m sweeper.exporters.prometheus RUN_DIR [--port 9109] [--host 127.0.0.1]

RUN_DIR is a run folder (results/<sweep>/<run-id>) or a sweep folder
(results/<sweep>), in which case the newest run with a summary is served. The
folder is read again at every scrape, so a sweep in progress shows up as its
trials finish. Per cell: the median over its finished repeats of each repeat's
p50 / p95 step time (seconds), and the same for the baseline cell, so an alert can
compare the two (docs/prometheus-alert.yml: p95 above baseline x 1.15).

    sweeper_cell_step_seconds{sweep, run, cell_id, cell, quantile="0.5"|"0.95"}
    sweeper_baseline_step_seconds{sweep, run, quantile}
    sweeper_cell_repeats{sweep, run, cell_id, cell}
    sweeper_cell_items_per_second{sweep, run, cell_id, cell}
"""
from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

log = logging.getLogger(__name__)
QUANTILES = (("p50", "0.5"), ("p95", "0.95"))


def latest_run(path: Path) -> Optional[Path]:
    """The run folder itself, or the newest run folder with a summary under a sweep folder."""
    if (path / "summary.parquet").exists():
        return path
    runs = [p for p in path.iterdir() if (p / "summary.parquet").exists()] if path.is_dir() else []
    return max(runs, key=lambda p: (p / "summary.parquet").stat().st_mtime, default=None)


def cell_figures(run: Path):
    """One row per cell: cell_id, label, is_baseline, repeats, p50, p95 (medians over repeats), items/s."""
    import pandas as pd

    from sweeper.analysis.cells import cell_label, normalise, repeat_table, swept_axes
    from sweeper.results import load

    summary, steps = load(run)
    summary = normalise(summary)
    repeats = repeat_table(summary, steps)
    axes = swept_axes(summary)
    labels = {c: cell_label({a: g[a].iloc[0] for a in axes}) or c for c, g in summary.groupby("cell_id")}
    baseline = set(summary.loc[summary["is_baseline"], "cell_id"])
    rows = [{"cell_id": c, "cell": labels.get(c, c), "is_baseline": c in baseline, "repeats": len(g),
             "p50": g["p50"].median(), "p95": g["p95"].median(), "items_per_s": g["items_per_s"].median()}
            for c, g in repeats.groupby("cell_id")]
    return pd.DataFrame(rows), summary


class RunCollector:
    """A prometheus_client collector that reads the run folder at each scrape."""

    def __init__(self, path: Path):
        self.path = path

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily

        step = GaugeMetricFamily("sweeper_cell_step_seconds", "Median over repeats of each repeat's step-time "
                                 "quantile, per cell", labels=["sweep", "run", "cell_id", "cell", "quantile"])
        base = GaugeMetricFamily("sweeper_baseline_step_seconds", "The baseline cell's step-time quantile",
                                 labels=["sweep", "run", "quantile"])
        count = GaugeMetricFamily("sweeper_cell_repeats", "Finished repeats per cell",
                                  labels=["sweep", "run", "cell_id", "cell"])
        rate = GaugeMetricFamily("sweeper_cell_items_per_second", "Median over repeats of items/s",
                                 labels=["sweep", "run", "cell_id", "cell"])
        run = latest_run(self.path)
        if run is not None:
            self._fill(run, step, base, count, rate)
        yield from (step, base, count, rate)

    @staticmethod
    def _fill(run: Path, step, base, count, rate) -> None:
        cells, _ = cell_figures(run)
        sweep, run_id = run.parent.name, run.name
        for row in cells.itertuples():
            labels = [sweep, run_id, row.cell_id, row.cell]
            count.add_metric(labels, row.repeats)
            if math.isfinite(row.items_per_s):
                rate.add_metric(labels, row.items_per_s)
            for name, quantile in QUANTILES:
                value = getattr(row, name)
                if not math.isfinite(value):
                    continue
                step.add_metric(labels + [quantile], value)
                if row.is_baseline:
                    base.add_metric([sweep, run_id, quantile], value)


def serve(path: Path, port: int, host: str = "127.0.0.1"):
    """Starts the HTTP server in a thread; returns (server, thread) for shutdown()."""
    from prometheus_client import start_http_server
    from prometheus_client.core import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(RunCollector(path))
    return start_http_server(port, addr=host, registry=registry)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweeper.exporters.prometheus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run folder, or a sweep folder (its newest run is served)")
    parser.add_argument("--port", type=int, default=9109)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    args = parser.parse_args(argv)
    path = Path(args.run_dir)
    if latest_run(path) is None:
        print(f"error: {path} holds no run with a summary.parquet", file=sys.stderr)
        return 2
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("error: prometheus_client is not installed: pip install prometheus-client", file=sys.stderr)
        return 2
    server, _ = serve(path, args.port, args.host)
    print(f"serving {path} at http://{args.host}:{args.port}/metrics", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
