"""What the whole-shard check before trials costs on the default shards, against a run's total.

    python benchmarks/shard_check.py              # about 1 minute on a 2-core machine
    python benchmarks/shard_check.py --runs 9     # more runs of each check (medians shown)
    python benchmarks/shard_check.py --no-sweep   # the checks only

Makes the default synthetic set (16 shards of 256 samples, seq_len 1024: 21 MB) in a scratch
cache, then times the check the plan runs before any trial (workloads/shard_check.py):
cold (no cached count: every tar walked header by header) and cached (one small file read
per shard, as every later run does), and what a 16-job grid's two plans spend on it. The files themselves are in the OS page cache both
times, as they are right after a run made them. Then a default one-trial sweep
(executor=local, W&B off) over the same cache gives the run's total to set them against.
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

from benchmarks._common import (PYTHON, bench_env, fmt, load_average, machine_line, markdown_table,  # noqa: E402
                                median, run_timed)

RUNS = 5
GRID_JOBS = 16          # +sweep=dataloader: each job's plan checks its shards; the driver plans twice
SWEEP = ["executor=local", "repeats=1", "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]


def timed(step: Callable[[], object], before: Callable[[], None], runs: int) -> float:
    """Median wall seconds of `step`, with `before` run (untimed) ahead of each."""
    times: List[float] = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each check (median shown)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the one-trial sweep (the run's total)")
    args = parser.parse_args()

    from sweeper.schema import DataConfig
    from workloads.shards import check_synthetic_shards, ensure_synthetic_shards, whole_shards_problem

    data_in = lambda folder: DataConfig(cache_dir=str(folder))   # noqa: E731

    data = DataConfig()
    cache = Path(tempfile.mkdtemp(prefix="sweeper-shard-check-"))
    try:
        start = time.perf_counter()
        paths = ensure_synthetic_shards(str(cache), data.num_shards, data.samples_per_shard, data.seq_len,
                                        data.vocab_size, data.seed)
        made_s = time.perf_counter() - start
        check = lambda: whole_shards_problem(paths, str(cache), "")   # noqa: E731
        forget = lambda: shutil.rmtree(cache / "checked", ignore_errors=True)   # noqa: E731
        assert check() == "", check()
        cold = timed(check, forget, args.runs)
        check()
        cached = timed(check, lambda: None, args.runs)
        grid = timed(lambda: [check_synthetic_shards(data_in(cache)) for _ in range(2 * GRID_JOBS)], forget, args.runs)
        total = None
        if not args.no_sweep:
            sweep = run_timed([PYTHON, "-m", "sweeper", f"results_dir={cache / 'results'}", *SWEEP],
                              env=bench_env({"SWEEPER_CACHE": str(cache)}))
            total = sweep.wall_s if sweep.returncode == 0 else None
        size_mb = sum(Path(p).stat().st_size for p in paths) / 1e6
        report(len(paths), size_mb, made_s, cold, cached, grid, total, args.runs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def report(shards: int, size_mb: float, made_s: float, cold: float, cached: float, grid: float, total,
           runs: int) -> None:
    share = lambda s: f"{100 * s / total:.2f}%" if total else "-"   # noqa: E731
    rows = [
        ["making the set (first run only)", fmt(made_s, 2), share(made_s)],
        [f"whole-shard check, cold (every tar walked; median of {runs})", fmt(cold * 1000, 1) + " ms", share(cold)],
        [f"whole-shard check, cached (median of {runs})", fmt(cached * 1000, 1) + " ms", share(cached)],
        [f"the checks of a {GRID_JOBS}-job grid, planned twice: one cold, the rest cached", fmt(grid * 1000, 1) + " ms",
         share(grid)],
        ["default one-trial sweep, executor=local (the run's total)", fmt(total, 1) if total else "-", ""],
    ]
    print(f"{shards} default shards, {size_mb:.1f} MB; {machine_line()}; load {load_average()}")
    print(markdown_table(["step", "time (s unless ms)", "of the run's total"], rows))


if __name__ == "__main__":
    main()
