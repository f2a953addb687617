"""A/A experiment: how often does sweeper call a cell different from itself?

Runs `python -m sweeper` SWEEPS times on one DataLoader cell (small steps), each with
REPEATS repeats (each repeat a fresh process), then makes many disjoint A/A comparisons:

  within a sweep   consecutive blocks of 2 x K repeats (in run order), split into
                   interleaved halves: K vs K, as the report's noise floor does
  between sweeps   sweep 2i against sweep 2i+1, K repeats from each, block by block:
                   what `sweeper.compare` faces in CI (the machine changes between runs)

Each comparison is stats.compare_cells on per-repeat p50 (Mann-Whitney, alpha 0.05,
min effect 5%), as the report does; and the CI gate's rule (`sweeper.compare`,
max-ratio 1.15: B significantly above A x 1.15). For contrast it also tests the same
pairs over pooled steps (Mann-Whitney over every step), which overstates significance.
It prints the flag rates with 95% Wilson intervals and writes them as JSON.

    python benchmarks/aa_experiment.py --sweeps 8 --repeats 40        # about 5-10 min on 2 cores
    python benchmarks/aa_experiment.py --from /tmp/sweeper-aa         # analyse earlier sweeps again
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_line  # noqa: E402
from sweeper.analysis import stats  # noqa: E402
from sweeper.analysis.load import load_run  # noqa: E402
from sweeper.analysis.repeats import repeat_table  # noqa: E402

CELL = ["data.num_workers=0", "data.num_shards=4", "data.samples_per_shard=128", "data.seq_len=256",
        "data.batch_size=16", "wandb.enabled=false", "report.enabled=false"]


def run_sweep(results: Path, run_id: str, repeats: int, steps: int) -> Path:
    cmd = [sys.executable, "-m", "sweeper", *CELL, f"workload.steps={steps}", "workload.warmup_steps=5",
           f"repeats={repeats}", f"results_dir={results}", "sweep.name=aa", f"run_id={run_id}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"sweep {run_id} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return results / "aa" / run_id


def repeats_in_run_order(run: Path):
    """[(per-repeat p50, that repeat's measured steps)] sorted by start time."""
    data = load_run(run)
    table = repeat_table(data.summary, data.steps).sort_values("started_at")
    measured = data.steps[~data.steps["warmup"].astype(bool)]
    return [(row.p50, measured.loc[measured["trial_id"] == row.trial_id, "step_s"].to_numpy(float))
            for row in table.itertuples()]


MAX_RATIO = 1.15
SCOPES = ("flagged", "significant_any_effect", "gate_worse_1.15", "pooled_steps_flagged")


def judge(a, b):
    """Per SCOPES: flagged by the report's rule, significant at all, WORSE by the CI gate's
    rule, flagged over pooled steps."""
    a_p50, b_p50 = [x[0] for x in a], [x[0] for x in b]
    c = stats.compare_cells(a_p50, b_p50, n_resamples=200)
    gate = stats.compare_cells(np.multiply(a_p50, MAX_RATIO), b_p50, min_effect=0.0, n_resamples=200)
    pooled_p = stats.stats.mannwhitneyu(np.concatenate([x[1] for x in a]), np.concatenate([x[1] for x in b])).pvalue
    return c.verdict in (stats.FASTER, stats.SLOWER), c.p_value < 0.05, gate.verdict == stats.SLOWER, pooled_p < 0.05


def within(runs, k):
    out = []
    for repeats in runs:
        for start in range(0, len(repeats) - 2 * k + 1, 2 * k):
            block = repeats[start:start + 2 * k]
            out.append(judge(block[0::2], block[1::2]))
    return out


def between(runs, k):
    out = []
    for a, b in zip(runs[0::2], runs[1::2]):
        for start in range(0, min(len(a), len(b)) - k + 1, k):
            out.append(judge(a[start:start + k], b[start:start + k]))
    return out


def wilson(flags: int, n: int, z: float = 1.96):
    if n == 0:
        return math.nan, math.nan
    p = flags / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def rates(results):
    n = len(results)
    out = {"comparisons": n}
    for i, name in enumerate(SCOPES):
        k = int(sum(bool(r[i]) for r in results))
        low, high = wilson(k, n)
        out[name] = {"count": k, "rate": k / n if n else math.nan, "wilson95": [low, high]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--k", type=int, default=5, help="repeats per side of each comparison")
    parser.add_argument("--results", default="/tmp/sweeper-aa")
    parser.add_argument("--json", default=None, help="write the figures here too")
    parser.add_argument("--from", dest="reuse", default=None, help="analyse the sweeps already under this folder")
    args = parser.parse_args()
    started = time.time()
    results = Path(args.reuse or args.results)
    if args.reuse:
        folders = sorted((results / "aa").iterdir(), key=lambda p: int(p.name.rsplit("-", 1)[1]))
        runs = [repeats_in_run_order(f) for f in folders]
        args.sweeps, args.repeats = len(runs), len(runs[0])
    else:
        runs = []
        for i in range(args.sweeps):
            run = run_sweep(results, f"aa-{int(started)}-{i}", args.repeats, args.steps)
            runs.append(repeats_in_run_order(run))
            print(f"sweep {i + 1}/{args.sweeps}: {len(runs[-1])} repeats, p50 median "
                  f"{np.median([r[0] for r in runs[-1]]) * 1e3:.3f} ms", flush=True)
    report = {"machine": f"{platform.node()}: {machine_line()}",
              "command": " ".join(sys.argv), "sweeps": args.sweeps, "repeats": args.repeats, "steps": args.steps,
              "k": args.k, "minutes": (time.time() - started) / 60,
              "within_sweep": rates(within(runs, args.k)), "between_sweeps": rates(between(runs, args.k)),
              "repeat_p50_cv": float(np.std([r[0] for run in runs for r in run], ddof=1)
                                     / np.mean([r[0] for run in runs for r in run]))}
    for scope in ("within_sweep", "between_sweeps"):
        r = report[scope]
        print(f"{scope}: {r['comparisons']} A/A comparisons of {args.k} vs {args.k} repeats")
        for name in SCOPES:
            x = r[name]
            print(f"  {name:<24} {x['count']:>3}  rate {x['rate']:.3f}  95% [{x['wilson95'][0]:.3f}, "
                  f"{x['wilson95'][1]:.3f}]")
    print(f"per-repeat p50 CV across all repeats: {report['repeat_p50_cv']:.3f}; took {report['minutes']:.1f} min")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
