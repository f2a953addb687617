"""The sections every trial carries: workload.*, resources.*, probe.*."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from sweeper.schema._base import DEVICES, ISOLATION_MODES, ON_OOM, PROFILES, _require
from sweeper.schema.data import MAX_WORKERS, SEED_END

MAX_TIMEOUT_S = 7 * 24 * 3600       # resources.timeout_s: a week; select() overflows near 9.2e9 s


@dataclass
class WorkloadConfig:
    # `target` is "module:function"; the function gets (cfg, probe) and may return a dict of extra figures.
    target: str = "workloads.dataloader:run"
    spec: Optional[str] = None           # "module:NAME" of its WorkloadSpec; null: SPEC in the target's module, or the default
    steps: int = 100                     # measured steps, after warm-up
    warmup_steps: int = 10               # recorded, flagged, excluded from statistics
    device: str = "auto"                 # auto: cuda when the trial was given a GPU
    threads: Optional[int] = None        # torch threads; default: the CPUs Ray gave the trial
    seed: int = 0
    params: Dict[str, Any] = field(default_factory=dict)  # free-form, for user workloads

    def check(self) -> None:
        _require(":" in self.target, "workload.target", f"must look like 'package.module:function', got {self.target!r}")
        _require(self.steps > 0, "workload.steps", f"must be positive, got {self.steps}")
        _require(0 <= self.seed < SEED_END, "workload.seed",
                 f"must be between 0 and 2**32 - 1 (numpy's seeds), got {self.seed}")
        _require(self.warmup_steps >= 0, "workload.warmup_steps", "must be 0 or more")
        _require(self.device in DEVICES, "workload.device", f"must be one of {DEVICES}, got {self.device!r}")
        _require(self.threads is None or self.threads > 0, "workload.threads", "must be positive")
        _require(self.threads is None or self.threads <= MAX_WORKERS, "workload.threads",
                 f"{self.threads} threads is more than a node runs (at most {MAX_WORKERS}); "
                 f"use a number near the node's CPU count, or null (the CPUs the trial gets)")


@dataclass
class ResourcesConfig:
    # How trials share a machine: node = one trial per node at a time (loader sweeps),
    # gpu = one per GPU, pack = as many as their CPU and GPU requests allow.
    isolation: str = "node"
    gpus: Optional[float] = None         # None: 1 when the cluster has GPUs, else 0
    cpus: Optional[float] = None         # None: num_workers + 1, capped at one node's CPUs
    timeout_s: float = 1800.0            # wall-clock limit per trial
    memory_limit_gb: Optional[float] = None  # host address space a trial may add (RLIMIT_AS); None: no cap
    on_oom: str = "record"               # record: an "oom" row; halve: retry with half the (micro-)batch
    max_retries: int = 0                 # re-runs of a trial whose process or node died
    every_device: bool = False           # the fleet: each trial once on every GPU (GPU cells) or every node
                                         # (CPU cells) of the host or Ray cluster, pinned by Ray (docs/overnight.md)
    prestart: Optional[bool] = None      # the next trial's process (and CUDA) made ready while one runs; None: GPU trials

    def check(self) -> None:
        _require(self.isolation in ISOLATION_MODES, "resources.isolation",
                 f"must be one of {ISOLATION_MODES}, got {self.isolation!r}")
        _require(self.gpus is None or self.gpus >= 0, "resources.gpus", "must be 0 or more")
        _require(self.cpus is None or self.cpus > 0, "resources.cpus", "must be positive")
        _require(0 < self.timeout_s <= MAX_TIMEOUT_S, "resources.timeout_s",     # a larger one overflowed select()
                 f"must be positive and at most {MAX_TIMEOUT_S:,} s (a week), got {self.timeout_s:g}")
        _require(self.memory_limit_gb is None or self.memory_limit_gb > 0, "resources.memory_limit_gb",
                 "must be positive or null")
        _require(self.on_oom in ON_OOM, "resources.on_oom", f"must be one of {ON_OOM}, got {self.on_oom!r}")
        _require(self.max_retries >= 0, "resources.max_retries", "must be 0 or more")


@dataclass
class ProbeConfig:
    # What the probe measures in each trial; docs/measurement.md states each rule.
    sample_hz: float = 10.0              # utilisation sampler (CPU, NVML GPU, disk) per second; 0: off
    memory_every: int = 10               # host memory of the trial and its loader workers every N steps; 0: off
    settle: bool = False                 # warm-up ends once step time settles (never before workload.warmup_steps)
    settle_window: int = 10              # W: steps in each rolling median
    settle_tolerance: float = 0.05       # X: two consecutive windows' medians within this fraction = settled
    settle_max_steps: int = 200          # cap: warm-up ends here even if step time never settles
    growth_mb_per_100_steps: float = 10.0  # worker memory growing faster (with a good linear fit) is a warning
    profile: str = "none"                # none, torch (torch.profiler trace), pyspy (flame graph), nsys (NVTX marks)
    profile_wait: Optional[int] = None   # steps before the profiler warms up; null: workload.warmup_steps
    profile_warmup: int = 1
    profile_active: int = 5

    def check(self) -> None:
        _require(self.sample_hz == 0 or 1 <= self.sample_hz <= 1000, "probe.sample_hz",
                 f"must be 0 (off) or between 1 and 1000, got {self.sample_hz}")
        _require(self.memory_every >= 0, "probe.memory_every", f"must be 0 (off) or more, got {self.memory_every}")
        _require(self.settle_window >= 2, "probe.settle_window", f"must be 2 or more, got {self.settle_window}")
        _require(0 < self.settle_tolerance < 1, "probe.settle_tolerance",
                 f"must be a fraction between 0 and 1, got {self.settle_tolerance}")
        _require(self.settle_max_steps >= 2 * self.settle_window, "probe.settle_max_steps",
                 f"must be at least 2 x probe.settle_window={2 * self.settle_window}, got {self.settle_max_steps}")
        _require(self.growth_mb_per_100_steps > 0, "probe.growth_mb_per_100_steps", "must be positive")
        _require(self.profile in PROFILES, "probe.profile", f"must be one of {PROFILES}, got {self.profile!r}")
        _require(self.profile_wait is None or self.profile_wait >= 0, "probe.profile_wait", "must be 0 or more, or null")
        _require(self.profile_warmup >= 0, "probe.profile_warmup", "must be 0 or more")
        _require(self.profile_active >= 1, "probe.profile_active", f"must be 1 or more, got {self.profile_active}")
