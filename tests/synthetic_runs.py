"""Run folders built in a test's tmp_path from step times with known answers.

`write_run` lays out results/<sweep>/<run>/trials/<id>/{trial.json, steps.parquet,
config.yaml} as a sweep would, repeats interleaved in run order, the baseline cell run
twice as often; `loader_run` is a DataLoader-like run whose p50 and throughput disagree.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd

LOADER_SPEC = {"name": "dataloader", "items_label": "samples",
               "headline": [["time_to_first_batch_s", "first batch s", 1.0, 3]], "memory": "host_mem_gb"}
Steps = Callable[[np.random.Generator, int], np.ndarray]     # (rng, n) -> n step times, seconds


def write_run(run: Path, cells: Sequence[Tuple[str, Dict[str, Any], Steps]], repeats: int = 6, items: int = 32,
              steps: int = 30, warmup: int = 3, spec: Dict[str, Any] = LOADER_SPEC, seed: int = 0,
              failed: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """cells: (cell_id, swept values, step times); the first is the baseline. Trials named in
    `failed` end with status "failed" and no steps. Returns the records."""
    rng = np.random.default_rng(seed)
    records, clock = [], 1_800_000_000.0
    plan = [(cell, r) for r in range(2 * repeats) for cell in cells if r < repeats or cell is cells[0]]
    for (cell_id, swept, step_fn), repeat in plan:
        trial_id = f"{cell_id}-{repeat}"
        folder = run / "trials" / trial_id
        folder.mkdir(parents=True)
        ok = trial_id not in failed
        seconds = np.r_[np.full(warmup, 0.5), step_fn(rng, steps)]
        if ok:
            pd.DataFrame({"step": range(seconds.size), "warmup": [True] * warmup + [False] * steps,
                          "items": items, "step_s": seconds,
                          "mem_main_pss_mb": 100.0 + 10 * len(cell_id)}).to_parquet(folder / "steps.parquet")
        measured = seconds[warmup:]
        record = {"trial_id": trial_id, "cell_id": cell_id, "repeat": repeat, "is_baseline": cell_id == cells[0][0],
                  "sweep": "loader", "run_id": run.name, "status": "ok" if ok else "failed",
                  "error_type": None if ok else "RuntimeError", "error_message": None if ok else "worker died",
                  "overrides": [f"{k}={v}" for k, v in swept.items()] + ["+sweep=loader"], "swept": dict(swept),
                  "resources": {"isolation": "node", "num_cpus": 2.0, "num_gpus": 0.0}, "workload_spec": spec,
                  "summary": {"items_per_s": items * steps / measured.sum(), "step_p50_s": float(np.median(measured)),
                              "step_p95_s": float(np.percentile(measured, 95)), "steps": steps} if ok else {},
                  "figures": {"time_to_first_batch_s": 0.05 + 0.01 * repeat} if ok else {},
                  "fingerprint": {"host": "test", "cpu_model": "cpu", "cpu_count": 2, "python": "3.11"},
                  "started_at": clock, "ended_at": clock + 1.0, "record_version": 2}
        clock += 2.0
        (folder / "trial.json").write_text(json.dumps(record))
        (folder / "config.yaml").write_text(json.dumps({"data": dict(swept)}))
        records.append(record)
    return records


def steady(seconds: float, spread: float = 0.02) -> Steps:
    """Every step about `seconds`: a loader that keeps up, or a compute-bound step."""
    return lambda rng, n: seconds * np.exp(spread * rng.standard_normal(n))


def bursty(fast: float, stall: float, stall_share: float) -> Steps:
    """A prefetching loader: most batches already waiting (`fast`), a stall now and then.
    Its median step is short, its mean (what throughput pays) long."""
    def steps(rng, n):
        stalls = max(1, round(stall_share * n))
        out = np.r_[np.full(n - stalls, fast), np.full(stalls, stall)] * np.exp(0.02 * rng.standard_normal(n))
        return rng.permutation(out)
    return steps


def loader_run(run: Path, repeats: int = 6) -> List[Dict[str, Any]]:
    """Three loader cells: the baseline steady at 10 ms a batch (3,200 samples/s); prefetch=8
    with 2 ms batches and a 60 ms stall one step in five (p50 2 ms but 2,350 samples/s); and
    workers=4 steady at 8 ms (4,000 samples/s)."""
    return write_run(run, [
        ("base", {"data.num_workers": 2, "data.prefetch_factor": 2}, steady(0.010)),
        ("burst", {"data.num_workers": 2, "data.prefetch_factor": 8}, bursty(0.002, 0.060, 0.2)),
        ("more", {"data.num_workers": 4, "data.prefetch_factor": 2}, steady(0.008)),
    ], repeats=repeats)
