"""Registers the schemas with Hydra's ConfigStore so YAML is checked against them."""
from hydra.core.config_store import ConfigStore

from sweeper.schema import RootConfig


def register_configs() -> None:
    ConfigStore.instance().store(name="sweeper_schema", node=RootConfig)
