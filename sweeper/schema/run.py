"""How a sweep runs, not what a trial measures: adaptive.*, overnight.*, ray.*, sweep.*."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from sweeper.schema._base import _require, _require_name

@dataclass
class AdaptiveConfig:
    # Adaptive repeats (BenchmarkDotNet's stopping rule): each cell runs min_repeats, then one
    # more at a time until the confidence interval of its throughput over repeats is within
    # rel_halfwidth of its mean, or it reaches max_repeats. Off: `repeats` fixed repeats.
    enabled: bool = False
    min_repeats: int = 3
    max_repeats: int = 10
    rel_halfwidth: float = 0.02          # half-width of the interval / mean: 0.02 = 2%
    confidence: float = 0.95

    def check(self) -> None:
        _require(self.min_repeats >= 2, "adaptive.min_repeats", f"must be 2 or more (an interval needs two), got {self.min_repeats}")
        _require(self.max_repeats >= self.min_repeats, "adaptive.max_repeats",
                 f"must be at least adaptive.min_repeats={self.min_repeats}, got {self.max_repeats}")
        _require(self.rel_halfwidth > 0, "adaptive.rel_halfwidth", f"must be positive (0.02 = 2%), got {self.rel_halfwidth}")
        _require(0 < self.confidence < 1, "adaptive.confidence", f"must be between 0 and 1, got {self.confidence}")


@dataclass
class OvernightConfig:
    # A suite of sweeps safe to start from cron or a systemd timer (sweeper/overnight.py, docs/overnight.md).
    sweeps: List[str] = field(default_factory=list)  # empty: an ordinary sweep; names: run each in turn
    budget_s: Optional[float] = None     # the night's length: past it nothing new starts; null: no limit
    lock_file: str = "~/.cache/sweeper/overnight.lock"  # one suite at a time per lock file (fcntl.flock)
    deadline: Optional[float] = None     # epoch seconds after which a sweep starts no trial (the suite sets it)
    alerts: Optional[str] = None         # the regression check, "module:function" (night folder, night.json dict)
                                         # -> list of alerts; any alert: exit 3. null: failures alone decide

    def check(self) -> None:
        _require(self.budget_s is None or self.budget_s > 0, "overnight.budget_s", f"must be positive or null, got {self.budget_s}")
        _require(bool(str(self.lock_file).strip()), "overnight.lock_file", "must be a path")
        _require(self.alerts is None or ":" in self.alerts, "overnight.alerts",
                 f"must look like 'package.module:function', got {self.alerts!r}")
        for name in self.sweeps:
            _require(isinstance(name, str) and name and name != "overnight", "overnight.sweeps",
                     f"must list sweep names (conf/sweep/*.yaml) other than overnight, got {name!r}")
            _require_name("overnight.sweeps", name)


@dataclass
class RayConfig:
    address: Optional[str] = None        # None: start a local Ray; "auto" or "host:port": attach
    num_cpus: Optional[int] = None       # for a local Ray only
    num_gpus: Optional[int] = None       # for a local Ray only
    node_ip_address: Optional[str] = None  # this host's address as the cluster knows it (multi-homed hosts)
    runtime_env: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepMeta:
    name: str = "single"                 # a plain name: the run goes to <results_dir>/<name>/<run_id>
    description: str = ""

    def check(self) -> None:
        _require_name("sweep.name", self.name)
