"""Registers the schemas with Hydra's ConfigStore so YAML is checked against them, and the one
resolver of sweeper's own that conf/config.yaml uses."""
import os
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from sweeper.schema import RootConfig

ENV_RESOLVER = "sweeper.env"


def variable_or_null(name: str) -> Optional[str]:
    """`${sweeper.env:NAME}`: the variable's value, null where it is unset or empty, as Ray reads
    RAY_ADDRESS (OmegaConf's oc.env gives an empty string, which a key's check refuses as a likely
    unset variable of the user's own)."""
    return os.environ.get(name) or None


def register_configs() -> None:
    ConfigStore.instance().store(name="sweeper_schema", node=RootConfig)
    if not OmegaConf.has_resolver(ENV_RESOLVER):
        OmegaConf.register_new_resolver(ENV_RESOLVER, variable_or_null)
