"""Typed config schemas: the one place where keys, defaults, checks and key roles live.

YAML under conf/ holds values; these dataclasses hold the shape. Hydra merges
the YAML onto them (so a typo fails with "Key 'x' not in 'DataConfig'"), and
`root_config_from_dict` turns the resolved dict into checked objects once, at
the edge. Nothing here imports Hydra, Ray or torch: trial workers unpickle these.

One module per group of sections (data, trial, train, run, output), the whole config in
`root`, and each key's role (measurement, placement, output, run control) in `roles`:
`key_role(dotted)`, `is_measurement(dotted)`, `measurement_keys(keys)`.
"""
from __future__ import annotations

from typing import List

from sweeper.schema._base import (DEVICES, EXECUTORS, ISOLATION_MODES, METRICS, OBJECTIVES, ON_OOM, ORDERS, PROFILES,
                                  WANDB_MODES)
from sweeper.schema.data import DALI_DECODERS, DALI_EXECUTORS, DATA_KINDS, LOADERS, DaliConfig, DataConfig, ImageConfig
from sweeper.schema.output import (AnalysisConfig, ConstraintsConfig, CostConfig, HistoryConfig, MlflowConfig,
                                   ReportConfig, WandbConfig)
from sweeper.schema.roles import ROLES, Role, is_measurement, key_role, measurement_keys
from sweeper.schema.root import (CORE_SECTIONS, TRIAL_SECTIONS, RootConfig, TrialConfig, root_config_from_dict,
                                 swept_value, trial_config, trial_config_from_dict, trial_dict)
from sweeper.schema.run import AUTO, OvernightConfig, RayConfig, SequentialConfig, SweepMeta
from sweeper.schema.train import (DATA_SOURCES, PRECISIONS, TRAIN_BACKENDS, TRAIN_PRESETS, ZERO_STAGES,
                                  TrainConfig)
from sweeper.schema.trial import ProbeConfig, ResourcesConfig, WorkloadConfig

__all__: List[str] = [
    "DataConfig", "ImageConfig", "DaliConfig", "WorkloadConfig", "ResourcesConfig", "RayConfig", "SweepMeta", "TrialConfig",
    "RootConfig", "AnalysisConfig", "CostConfig", "ConstraintsConfig", "WandbConfig", "MlflowConfig", "ReportConfig",
    "HistoryConfig", "TrainConfig", "ProbeConfig", "SequentialConfig", "OvernightConfig", "AUTO",
    "trial_config_from_dict", "root_config_from_dict", "trial_dict", "trial_config", "swept_value",
    "TRIAL_SECTIONS", "CORE_SECTIONS", "TRAIN_PRESETS", "METRICS", "EXECUTORS",
    "Role", "ROLES", "key_role", "is_measurement", "measurement_keys",
]
