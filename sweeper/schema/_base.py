"""What every section module shares: the one check helper and the choice lists."""
from __future__ import annotations

from typing import Any

from sweeper.errors import ConfigError

ISOLATION_MODES = ("node", "gpu", "pack")
DEVICES = ("auto", "cpu", "cuda")
ORDERS = ("interleaved", "grid")
EXECUTORS = ("ray", "local")
ON_OOM = ("record", "halve")
METRICS = ("throughput", "p50", "p95")
OBJECTIVES = ("throughput", "cost")
WANDB_MODES = ("offline", "online", "disabled")
PROFILES = ("none", "torch", "pyspy", "nsys")


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


def _is_import_path(value: Any) -> bool:
    """'package.module:name' with both parts non-empty."""
    module, sep, name = str(value).partition(":")
    return bool(sep and module.strip() and name.strip() and ":" not in name)
