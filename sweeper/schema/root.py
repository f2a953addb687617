"""The whole config and a trial's share of it, built from plain dicts once, at the edge."""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

from sweeper.schema._base import EXECUTORS, ORDERS, PATH_KEYS, _require, _require_name, home_problem
from sweeper.schema.data import DaliConfig, DataConfig, ImageConfig
from sweeper.schema.output import (AnalysisConfig, ConstraintsConfig, CostConfig, HistoryConfig, MlflowConfig,
                                   ReportConfig, WandbConfig)
from sweeper.schema.run import OvernightConfig, RayConfig, SequentialConfig, SweepMeta, check_repeats, removed_line
from sweeper.schema.train import TrainConfig
from sweeper.schema.trial import ProbeConfig, ResourcesConfig, WorkloadConfig

@dataclass
class TrialConfig:
    """What one trial receives: everything that shapes its measurement. A trial's own copy
    carries only the workload sections its spec names (the others are None)."""
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    data: Optional[DataConfig] = field(default_factory=DataConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    train: Optional[TrainConfig] = field(default_factory=TrainConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    def check(self) -> None:
        self.workload.check()
        if self.data is not None:
            self.data.check()
        self.resources.check()
        if self.train is not None:
            self.train.check(self.data)
        self.probe.check()


@dataclass
class RootConfig(TrialConfig):
    """The whole composed config (without `hydra`)."""
    sweep: SweepMeta = field(default_factory=SweepMeta)
    ray: RayConfig = field(default_factory=RayConfig)
    results_dir: str = "results"
    run_id: str = "???"
    dry_run: bool = False                # print the trial plan and launch nothing
    repeats: Any = 1                     # runs per grid point, each in its own process; auto: until each
                                         # cell is decided against its baseline (sequential.*)
    order: str = "interleaved"           # interleaved: shuffled rounds, so drift is not an effect; grid: in order
    order_seed: int = 0
    resume: Optional[str] = None         # a run id under results/<sweep>/, or "latest": re-run only what is missing or failed
    executor: str = "ray"                # ray: trials as Ray tasks, each in a process of its own; local: one at a
                                         # time inside this process (for a debugger or a profiler; no timeouts)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    overnight: OvernightConfig = field(default_factory=OvernightConfig)

    def check(self) -> None:
        super().check()
        self.analysis.check()
        self.cost.check()
        _require(self.analysis.objective != "cost" or self.cost.enabled, "analysis.objective",
                 "is cost but no price is set: give cost.gpu_hour_usd (e.g. '+cost.gpu_hour_usd={H200:3.5}') "
                 "or cost.cpu_hour_usd")
        self.sequential.check()
        self.overnight.check()
        self.ray.check()
        self.wandb.check()
        self.mlflow.check()
        self.history.check()
        self.sweep.check()
        if self.run_id != "???":          # unset until Hydra resolves it (${now:...})
            _require_name("run_id", self.run_id)
        _require(bool(str(self.results_dir).strip()), "results_dir",
                 "is empty (an unset variable?), so runs would land in the current folder; give a folder, "
                 "e.g. results_dir=results (results_dir=. for the current one)")
        check_repeats(self.repeats)
        _require(self.order in ORDERS, "order", f"must be one of {ORDERS}, got {self.order!r}")
        _require(self.executor in EXECUTORS, "executor", f"must be one of {EXECUTORS}, got {self.executor!r}")


def _build(cls, values: Dict[str, Any], prefix: str):
    """Dataclass from a plain dict, naming the dotted key of anything unknown."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        _require(key in known, f"{prefix}{key}", removed_line(f"{prefix}{key}") or f"unknown key; valid keys: {sorted(known)}")
        sub = known[key].type
        sub_cls = _SECTIONS.get(sub.replace("Optional[", "").rstrip("]")) if isinstance(sub, str) else None
        _require_finite(f"{prefix}{key}", value)
        _require(not (sub == "Optional[str]" and isinstance(value, str) and not value.strip()), f"{prefix}{key}",
                 "is empty (an unset variable?), which would read as not set; give a value, or null to leave it unset")
        unknown_home = home_problem(value) if f"{prefix}{key}" in PATH_KEYS else None   # ~nosuchuser/results
        _require(unknown_home is None, f"{prefix}{key}", str(unknown_home))
        kwargs[key] = _build(sub_cls, value or {}, f"{prefix}{key}.") if sub_cls else value
    return cls(**kwargs)


def _require_finite(key: str, value: Any) -> None:
    """nan passes no comparison and inf every upper-bound-free one, so each section's own
    check would let them through to a trial (an int(inf) there fails every trial); an integer
    past 64 bits fails where the records are written (parquet), after the trials ran."""
    _require(not (isinstance(value, float) and not math.isfinite(value)), key,
             f"must be a finite number, got {value}; give a number (or null where the key allows it)")
    _require(not (isinstance(value, int) and not -2 ** 63 <= value < 2 ** 63), key,
             f"is past a 64-bit integer, got {value}; give a smaller number")


_SECTIONS = {
    "DataConfig": DataConfig, "ImageConfig": ImageConfig, "DaliConfig": DaliConfig, "WorkloadConfig": WorkloadConfig, "ResourcesConfig": ResourcesConfig,
    "RayConfig": RayConfig, "SweepMeta": SweepMeta,
    "AnalysisConfig": AnalysisConfig, "ConstraintsConfig": ConstraintsConfig, "WandbConfig": WandbConfig,
    "MlflowConfig": MlflowConfig, "CostConfig": CostConfig, "ReportConfig": ReportConfig, "HistoryConfig": HistoryConfig,
    "TrainConfig": TrainConfig, "ProbeConfig": ProbeConfig,
    "SequentialConfig": SequentialConfig, "OvernightConfig": OvernightConfig,
}

TRIAL_SECTIONS = ("workload", "data", "resources", "train", "probe")
CORE_SECTIONS = ("workload", "resources", "probe")     # every trial carries these


def trial_config_from_dict(values: Dict[str, Any]) -> TrialConfig:
    """Checked TrialConfig from a resolved dict; extra top-level keys are ignored."""
    picked = {k: values[k] for k in TRIAL_SECTIONS if k in values}
    cfg = _build(TrialConfig, picked, "")
    cfg.check()
    return cfg


def root_config_from_dict(values: Dict[str, Any]) -> RootConfig:
    values = {k: v for k, v in values.items() if k != "hydra"}
    cfg = _build(RootConfig, values, "")
    cfg.check()
    return cfg


def trial_dict(cfg: TrialConfig) -> Dict[str, Any]:
    """The trial's sections as plain dicts (a section it does not carry is left out)."""
    return {k: dataclasses.asdict(getattr(cfg, k)) for k in TRIAL_SECTIONS if getattr(cfg, k) is not None}


def trial_config(root: TrialConfig, sections: Sequence[str]) -> TrialConfig:
    """A trial's own config: the core sections and the workload sections its spec names."""
    kept = {k: copy.deepcopy(getattr(root, k)) for k in TRIAL_SECTIONS if k in CORE_SECTIONS or k in sections}
    return TrialConfig(**{k: kept.get(k) for k in TRIAL_SECTIONS})


def swept_value(cfg: TrialConfig, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    return node
