"""Credentials out of what the launcher hands on from Hydra: multirun.yaml's text.

Hydra's config holds every override as typed, credentials included. The launcher first tells
sweeper.redact which credentials this sweep's config holds (so a log line or an error that
repeats one is redacted too), then hands the driver multirun.yaml's text redacted, so the run
folder never holds the real values. The jobs themselves keep them.
"""
from __future__ import annotations

from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from sweeper.redact import redact, remember


def remember_credentials(config: DictConfig, job_overrides: Sequence[Sequence[str]]) -> None:
    remember(OmegaConf.to_container(config, resolve=False))
    remember([list(overrides) for overrides in job_overrides])


def redacted_yaml(config: DictConfig) -> str:
    """multirun.yaml as Hydra writes it (interpolations kept), every credential in it redacted."""
    return OmegaConf.to_yaml(OmegaConf.create(redact(OmegaConf.to_container(config, resolve=False))))
