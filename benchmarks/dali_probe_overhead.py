"""What the sweeper's trial adds to a DALI loader, on the CPU path (no GPU needed): a bare DALI
loop against the same pipeline through workloads/dataloader.py with the trial's real probe.

    python benchmarks/dali_probe_overhead.py --rounds 4 --steps 300

Both sides build a fresh pipeline (DALI CPU decode of small JPEGs, so a step is short and any
per-step cost shows), run --warmup batches, then time --steps batches. The bare side's figure is
images over the wall time of its timed batches; the sweeper side's is the trial's own
items_per_s (images over the sum of its step times), from the probe that `Probe.for_trial` builds
for a CPU trial (10 Hz sampler, memory readings every 10 steps). Sides alternate (ABBA), and the
table gives each side's median and the median of the per-round ratios; docs/loaders.md keeps
the numbers.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from sweeper.probe import Probe
from sweeper.schema import DataConfig, ProbeConfig, TrialConfig, WorkloadConfig
from workloads import dataloader
from workloads.dali_loader import build_iterator, build_pipeline
from workloads.shards import ensure_dali_indexes


def config(args) -> TrialConfig:
    data = DataConfig(kind="images", loader="dali", batch_size=args.batch, num_shards=4, samples_per_shard=128,
                      cache_dir=args.cache)
    data.images.height, data.images.width, data.images.crop_size = 96, 128, 64
    data.dali.num_threads = args.threads
    return TrialConfig(data=data, workload=WorkloadConfig(target="workloads.dataloader:run", steps=args.steps,
                                                          warmup_steps=args.warmup, device="cpu"))


def bare(cfg: TrialConfig, paths, indexes) -> float:
    it = build_iterator(build_pipeline(cfg.data, paths, indexes, None))

    def one():
        try:
            return next(it)
        except StopIteration:
            return next(it)
    for _ in range(cfg.workload.warmup_steps):
        one()
    t0 = time.perf_counter()
    for _ in range(cfg.workload.steps):
        one()
    return cfg.workload.steps * cfg.data.batch_size / (time.perf_counter() - t0)


def through_probe(cfg: TrialConfig) -> tuple:
    probe = Probe.for_trial(ProbeConfig(), "cpu", cfg.workload.warmup_steps)
    with probe:
        dataloader.run(cfg, probe)
    summary = probe.summary()
    return summary["items_per_s"], summary.get("phase_other_mean_s", float("nan"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cache", default="/tmp/sweeper-dali-overhead")
    args = p.parse_args()
    cfg = config(args)
    paths = dataloader.shard_paths(cfg.data)
    indexes = ensure_dali_indexes(paths, cfg.data.cache_dir)
    plain, swept, other, ratios = [], [], [], []
    for r in range(args.rounds):
        order = ("bare", "probe") if r % 2 == 0 else ("probe", "bare")
        got = {}
        for side in order:
            if side == "bare":
                got[side] = bare(cfg, paths, indexes)
            else:
                got[side], o = through_probe(cfg)
                other.append(o)
        plain.append(got["bare"]), swept.append(got["probe"]), ratios.append(got["probe"] / got["bare"])
        print(f"round {r}: bare {got['bare']:8,.0f} images/s  through the probe {got['probe']:8,.0f}  "
              f"ratio {ratios[-1]:.3f}", flush=True)
    print(json.dumps({"bare_median": statistics.median(plain), "probe_median": statistics.median(swept),
                      "ratio_median": statistics.median(ratios),
                      "phase_other_mean_ms": 1e3 * statistics.median(other)}))


if __name__ == "__main__":
    main()
