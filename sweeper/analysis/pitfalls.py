"""Pitfall warnings: settings and measurements that point at a known way of losing speed or memory.

Each rule is a pure function of one trial record (its config, summary, figures and
fingerprint, as the record carries them) that returns a `Pitfall` or None. The analysis
runs them once per trial (`trial_pitfalls`); summary.parquet's `pitfalls` column, the
terminal, report.md/html and the W&B table read what they found. A rule whose inputs the
trial did not record stays quiet. docs/analysis.md#warnings states each threshold and why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional

from sweeper.analysis.overlap import COMPUTE_PHASES
from sweeper.measure.rules import Growth, GrowthRule, is_growing

# Data wait above this share of the step is a warning (the 10%; MLPerf Storage asks
# for >= 90% accelerator utilisation, which leaves the loader the same 10%).
DATA_WAIT_SHARE = 0.10
# Pinned memory in flight above this share of host memory. Page-locked memory cannot be
# paged out, torch's caching host allocator keeps every pinned block until the process
# ends and rounds each up to a power of two (so the pool can reach about 2x what is in
# flight), and the other ranks, the workers' own copies and the page cache of the shards
# need the rest: past a tenth of the host, one trial crowds the others on a node.
PINNED_SHARE_OF_HOST = 0.10
# DataLoader workers busier than this (percent of one core each, on average) are working,
# not waiting on a full queue: below it, a trainer that still waits is starved by the depth
# of the queue (num_workers x prefetch_factor batches), not by the workers' speed.
IDLE_WORKER_CPU_PCT = 50.0
# DALI's pool "gives memory back" when it holds less than this share of its peak after release.
DALI_RELEASE_SHARE = 0.90
TORCH_PREFETCH_DEFAULT = 2   # torch.utils.data.DataLoader's prefetch_factor when workers > 0


@dataclass(frozen=True)
class Pitfall:
    code: str        # short and stable: shards, pinned_memory, data_wait, worker_memory, prefetch, dali_pool
    message: str     # one line: what was measured, against what, and what to do


def _num(value: Any) -> Optional[float]:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class Facts:
    """What the rules read of one record: config by dotted key, figures and summary by name."""

    def __init__(self, record: Mapping[str, Any]):
        self.config = record.get("config") or {}
        self.figures = record.get("figures") or {}
        self.summary = record.get("summary") or {}
        self.fingerprint = record.get("fingerprint") or {}

    def setting(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return default if node is None else node

    def number(self, name: str) -> Optional[float]:
        """A figure, else a summary figure, as a finite float (None when not recorded)."""
        return _num(self.figures.get(name, self.summary.get(name)))

    @property
    def ranks(self) -> int:
        return int(self.setting("train.world_size", 1) or 1)

    @property
    def workers(self) -> Optional[int]:
        value = self.setting("data.num_workers")
        return None if value is None else int(value)

    @property
    def has_compute(self) -> bool:
        return any(f"phase_{p}_mean_s" in self.summary for p in COMPUTE_PHASES)


def few_shards(f: Facts) -> Optional[Pitfall]:
    """Each DataLoader worker of each rank reads whole shards: with fewer shards than workers x
    ranks some workers get none and sit idle (webdataset splits by shard)."""
    shards, workers = f.number("num_shards"), f.workers
    if shards is None or not workers:
        return None
    readers = workers * f.ranks
    if shards >= readers:
        return None
    return Pitfall("shards", f"{shards:.0f} shard(s) for {workers} worker(s) x {f.ranks} rank(s) = {readers} "
                             f"readers: {readers - shards:.0f} worker(s) get no shard and idle; write at least "
                             f"{readers} shards (data.num_shards) or use fewer workers")


def _batch_bytes(f: Facts) -> Optional[float]:
    found = f.number("batch_bytes")
    if found is not None:
        return found
    sample, batch = f.number("sample_bytes"), _num(f.setting("data.batch_size"))
    return sample * batch if sample is not None and batch is not None else None


def pinned_in_flight(f: Facts) -> Optional[Pitfall]:
    """workers x prefetch x batch bytes (x ranks) of pinned batches, against host memory."""
    pinned = f.figures.get("pin_memory_effective", f.setting("data.pin_memory", False))
    workers, batch, host_gb = f.workers, _batch_bytes(f), _num(f.fingerprint.get("host_mem_gb"))
    if not pinned or not workers or batch is None or not host_gb:
        return None
    prefetch = int(f.setting("data.prefetch_factor", TORCH_PREFETCH_DEFAULT))
    in_flight_gb = workers * prefetch * batch * f.ranks / 1e9
    if in_flight_gb <= PINNED_SHARE_OF_HOST * host_gb:
        return None
    return Pitfall("pinned_memory", f"pinned memory in flight {in_flight_gb:,.1f} GB ({workers} workers x "
                                    f"{prefetch} prefetch x {batch / 1e6:,.1f} MB a batch x {f.ranks} rank(s)) is "
                                    f"{in_flight_gb / host_gb * 100:.0f}% of the host's {host_gb:,.0f} GB (over "
                                    f"{PINNED_SHARE_OF_HOST * 100:.0f}%); lower prefetch_factor or num_workers")


def data_wait(f: Facts) -> Optional[Pitfall]:
    """The trainer waits for data more than DATA_WAIT_SHARE of the step (trials that compute;
    a loader-only trial waits by design)."""
    share = f.number("data_wait_share")
    if share is None or not f.has_compute or share <= DATA_WAIT_SHARE:
        return None
    return Pitfall("data_wait", f"data wait is {share * 100:.0f}% of the step (over {DATA_WAIT_SHARE * 100:.0f}%): "
                                f"the loader starves the step; more workers, prefetch, pinned memory or faster decode")


def worker_memory(f: Facts) -> Optional[Pitfall]:
    """Worker memory (USS, all workers) growing steadily over the measured steps: the probe's
    fit (sweeper/measure/rules.py) against probe.growth_mb_per_100_steps."""
    slope, r2 = f.number("mem_workers_uss_growth_mb_per_100_steps"), f.number("mem_workers_uss_growth_r2")
    readings = f.number("mem_workers_uss_growth_readings")
    if slope is None or r2 is None or readings is None:
        return None
    rule = GrowthRule(mb_per_100_steps=float(f.setting("probe.growth_mb_per_100_steps", GrowthRule.mb_per_100_steps)))
    if not is_growing(Growth(slope, r2, int(readings), 0, 0), rule):
        return None
    return Pitfall("worker_memory", f"DataLoader worker memory grew {slope:+.1f} MB per 100 steps (R^2 {r2:.2f}, "
                                    f"{readings:.0f} readings; over {rule.mb_per_100_steps:g}): a leak or "
                                    f"copy-on-read of Python objects in the dataset")


def prefetch_starving(f: Facts) -> Optional[Pitfall]:
    """The trainer waits (data wait over DATA_WAIT_SHARE) while the workers are idle (mean CPU
    under IDLE_WORKER_CPU_PCT of a core each): the queue of workers x prefetch batches runs
    dry between bursts, though the workers could fill a deeper one."""
    share, workers = f.number("data_wait_share"), f.workers
    busy = f.number("util_workers_cpu_pct_mean")
    if share is None or busy is None or not workers or not f.has_compute or share <= DATA_WAIT_SHARE:
        return None
    per_worker = busy / workers
    if per_worker >= IDLE_WORKER_CPU_PCT:
        return None
    prefetch = int(f.setting("data.prefetch_factor", TORCH_PREFETCH_DEFAULT))
    return Pitfall("prefetch", f"prefetch_factor={prefetch} leaves the loader starving: data wait "
                               f"{share * 100:.0f}% of the step while the {workers} worker(s) were busy "
                               f"{per_worker:.0f}% of a core each (under {IDLE_WORKER_CPU_PCT:.0f}%); raise "
                               f"data.prefetch_factor (if that does not help, the workers wait on I/O)")


def dali_pool(f: Facts) -> Optional[Pitfall]:
    """DALI's memory pools keep their peak after the pipeline is released (DALI issue #5087)."""
    if str(f.figures.get("loader", "")).lower() != "dali":
        return None
    peak, after = f.number("dali_mem_peak_mb"), f.number("dali_mem_after_release_mb")
    if peak is None or after is None or peak <= 0 or after < DALI_RELEASE_SHARE * peak:
        return None
    return Pitfall("dali_pool", f"DALI's memory pool kept {after:,.0f} of its {peak:,.0f} MB peak after the pipeline "
                                f"was released ({after / peak * 100:.0f}%, over {DALI_RELEASE_SHARE * 100:.0f}%): "
                                f"it never gives memory back; run each DALI pipeline in a process of its own")


RULES: Dict[str, Callable[[Facts], Optional[Pitfall]]] = {
    "shards": few_shards, "pinned_memory": pinned_in_flight, "data_wait": data_wait,
    "worker_memory": worker_memory, "prefetch": prefetch_starving, "dali_pool": dali_pool,
}


def trial_pitfalls(record: Mapping[str, Any]) -> List[Pitfall]:
    """Every pitfall one finished trial's record shows (none for a trial that did not finish)."""
    if record.get("status") != "ok":
        return []
    facts = Facts(record)
    return [p for p in (rule(facts) for rule in RULES.values()) if p is not None]


def codes(pitfalls: List[Pitfall]) -> str:
    """"data_wait;prefetch": the summary's `pitfalls` column."""
    return ";".join(p.code for p in pitfalls)
