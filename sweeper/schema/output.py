"""How results are judged and where they go: analysis.*, cost.*, wandb.*, mlflow.*, report.*, history.*."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from sweeper.schema._base import METRICS, OBJECTIVES, WANDB_MODES, _require

@dataclass
class ConstraintsConfig:
    # Limits a recommended configuration must respect; null: no limit. A limit whose
    # figure the trials did not record is ignored, and the recommendation says so.
    max_gpu_mem_gb: Optional[float] = None   # peak GPU memory of a trial
    max_host_mem_gb: Optional[float] = None  # peak host memory (RSS) of a trial and its workers
    max_cpus: Optional[float] = None         # CPU cores the trial asked for

    def check(self) -> None:
        for name in ("max_gpu_mem_gb", "max_host_mem_gb", "max_cpus"):
            value = getattr(self, name)
            _require(value is None or value > 0, f"analysis.constraints.{name}",
                     f"must be positive or null, got {value}")


@dataclass
class AnalysisConfig:
    # How results are judged (sweeper/analysis): each cell against the baseline, over repeats.
    baseline: Optional[str] = None       # "data.num_workers=0 data.pin_memory=false"; null: nearest PyTorch defaults
    alpha: float = 0.05                  # significance level, after Holm across cells
    min_effect: float = 0.05             # smallest change worth a verdict: 0.05 = 5%
    metric: str = "throughput"           # what verdicts judge: throughput (items/s per repeat), p50 or p95
    heatmap: List[str] = field(default_factory=list)  # two dotted keys; empty: the first two swept axes
    constraints: ConstraintsConfig = field(default_factory=ConstraintsConfig)
    objective: str = "throughput"        # what the recommendation optimises: throughput (the metric's verdicts)
                                         # or cost (the fewest dollars per million tokens / samples; needs cost.*)
    max_memory_gb: Optional[float] = None  # peak memory limit on the workload's own memory (GPU or host), GB
    compare_within: List[str] = field(default_factory=list)  # dotted keys: cells are compared only with cells
                                         # of the same values of these keys (a stratum each, its own baseline);
                                         # a run over several workloads is always compared within `workload`

    def check(self) -> None:
        _require(self.objective in OBJECTIVES, "analysis.objective",
                 f"must be one of {OBJECTIVES}, got {self.objective!r}")
        _require(self.max_memory_gb is None or self.max_memory_gb > 0, "analysis.max_memory_gb",
                 f"must be positive or null, got {self.max_memory_gb}")
        for token in (self.baseline or "").split():
            _require("=" in token, "analysis.baseline",
                     f"must be space-separated key=value pairs, e.g. 'data.num_workers=0', got {self.baseline!r}")
        _require(0 < self.alpha < 1, "analysis.alpha", f"must be between 0 and 1, got {self.alpha}")
        _require(self.min_effect >= 0, "analysis.min_effect", f"must be 0 or more (0.05 = 5%), got {self.min_effect}")
        _require(self.metric in METRICS, "analysis.metric", f"must be one of {METRICS}, got {self.metric!r}")
        _require(isinstance(self.compare_within, (list, tuple)) and
                 all(isinstance(k, str) and ("." in k or k == "workload") for k in self.compare_within),
                 "analysis.compare_within", f"must be a list of dotted keys, e.g. [data.kind], got {self.compare_within!r}")
        _require(len(self.heatmap) in (0, 2), "analysis.heatmap",
                 f"must name two dotted keys, e.g. [data.num_workers,data.prefetch_factor], got {list(self.heatmap)}")
        self.constraints.check()


@dataclass
class CostConfig:
    # Prices that turn throughput into dollars (sweeper/analysis/cost.py, docs/analysis.md#cost).
    # A GPU trial costs its GPUs x the price of its GPU model (the fingerprint's gpu_name, matched
    # exactly, else by the key as a substring: {"H200": 3.5} prices "NVIDIA H200"); a CPU trial
    # costs the CPUs it asked for x cpu_hour_usd. Empty: no cost columns.
    gpu_hour_usd: Dict[str, float] = field(default_factory=dict)   # per GPU model, USD per GPU-hour
    cpu_hour_usd: Optional[float] = None                            # USD per CPU-core-hour, for CPU trials

    def check(self) -> None:
        for model, price in (self.gpu_hour_usd or {}).items():
            _require(isinstance(price, (int, float)) and 0 < price < math.inf, f"cost.gpu_hour_usd.{model}",
                     f"must be a positive price in USD per GPU-hour, got {price!r}")
        _require(self.cpu_hour_usd is None or self.cpu_hour_usd > 0, "cost.cpu_hour_usd",
                 f"must be a positive price in USD per CPU-hour, or null, got {self.cpu_hour_usd}")

    @property
    def enabled(self) -> bool:
        return bool(self.gpu_hour_usd) or self.cpu_hour_usd is not None


WANDB_NOT_IN_PROJECT = "/\\#?%:"          # W&B's own rule for a project name (wandb.sdk.wandb_settings),
WANDB_PROJECT_MAX = 128                  # which it applies only at wandb.init, in each trial


@dataclass
class WandbConfig:
    # One W&B run per trial plus a summary run. Offline by default: no account, no network;
    # `wandb sync <run>/wandb/offline-run-*` uploads later. Credentials come from the
    # environment (WANDB_API_KEY) and never belong here.
    enabled: bool = True                 # false: no W&B at all
    mode: str = "offline"                # offline, online or disabled
    project: str = "sweeper"
    entity: Optional[str] = None
    dir: Optional[str] = None            # null: <run folder>/wandb
    log_steps: bool = True               # log every measured step (false: only the summary)

    def check(self) -> None:
        _require(self.mode in WANDB_MODES, "wandb.mode", f"must be one of {WANDB_MODES}, got {self.mode!r}")
        _require(bool(self.project), "wandb.project", "must not be empty")
        _require(len(str(self.project)) <= WANDB_PROJECT_MAX, "wandb.project",
                 f"is {len(str(self.project))} characters long, more than W&B takes ({WANDB_PROJECT_MAX})")
        _require(not any(c in str(self.project) for c in WANDB_NOT_IN_PROJECT), "wandb.project",
                 f"W&B refuses a project name with any of {WANDB_NOT_IN_PROJECT}, got {self.project!r}; "
                 f"give a plain name such as sweeper (the entity goes in wandb.entity)")


@dataclass
class MlflowConfig:
    # MLflow tracking: a parent run per sweep, a nested run per trial (sweeper/publishers/mlflow_sink.py).
    # An extra: pip install 'sweeper[mlflow]'. Credentials (MLFLOW_TRACKING_TOKEN, ...) stay in the environment.
    enabled: bool = False                # true: track this sweep in MLflow
    tracking_uri: Optional[str] = None   # null: sqlite:///<run folder>/mlflow.db (artifacts in <run folder>/mlruns);
                                         # or a server, e.g. http://mlflow.internal:5000
    experiment: str = "sweeper"

    def check(self) -> None:
        _require(bool(self.experiment), "mlflow.experiment", "must not be empty")
        _require(self.tracking_uri is None or bool(str(self.tracking_uri).strip()), "mlflow.tracking_uri",
                 "must be a URI such as http://host:5000 or sqlite:///path/mlflow.db, or null")
        if self.enabled:
            import importlib.util

            _require(importlib.util.find_spec("mlflow") is not None, "mlflow.enabled",
                     "is true but MLflow is not installed: pip install 'sweeper[mlflow]' (or mlflow.enabled=false)")


@dataclass
class ReportConfig:
    # report.html (self-contained) and report.md, written into the run folder when a sweep ends.
    enabled: bool = True


@dataclass
class HistoryConfig:
    # Every finished run is appended to a history store across nights (docs/history.md).
    enabled: bool = True                 # false: this run is not appended
    dir: Optional[str] = None            # null: <results_dir>/history, beside the runs it indexes
    alert_ratio: float = 1.15            # alert when a cell's items/s drops below its last good night / this,
                                         # or its p95 step time rises above the last good night x this
    step_threshold: float = 0.05         # asv step_detect: the smallest relative step it reports
    window: int = 60                     # the latest nights of each cell that the detection reads
    mix_machines: bool = False           # true: append a run whose trials ran on different machines

    def check(self) -> None:
        _require(self.alert_ratio > 1, "history.alert_ratio", f"must be above 1 (e.g. 1.15), got {self.alert_ratio}")
        _require(0 <= self.step_threshold < 1, "history.step_threshold",
                 f"must be in [0, 1) (a relative step, e.g. 0.05), got {self.step_threshold}")
        _require(self.dir is None or bool(str(self.dir).strip()), "history.dir", "must be a folder, or null")
        _require(self.window >= 3, "history.window", f"must be 3 nights or more, got {self.window}")
