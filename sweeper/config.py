"""Registers the schemas with Hydra's ConfigStore so YAML is checked against them, and the one
resolver of sweeper's own that conf/config.yaml uses (`${sweeper.env:NAME}`: sweeper/envvars.py)."""
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from sweeper.envvars import variable_or_null
from sweeper.schema import RootConfig

ENV_RESOLVER = "sweeper.env"


def register_configs() -> None:
    ConfigStore.instance().store(name="sweeper_schema", node=RootConfig)
    if not OmegaConf.has_resolver(ENV_RESOLVER):
        OmegaConf.register_new_resolver(ENV_RESOLVER, variable_or_null)
