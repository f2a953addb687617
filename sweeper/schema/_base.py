"""What every section module shares: the one check helper and the choice lists."""
from __future__ import annotations

import os
import re
from typing import Any, Optional

from sweeper.errors import ConfigError

ISOLATION_MODES = ("node", "gpu", "pack")
DEVICES = ("auto", "cpu", "cuda")
ORDERS = ("interleaved", "grid")
EXECUTORS = ("ray", "local")
ON_OOM = ("record", "halve")
METRICS = ("throughput", "p50", "p95")
OBJECTIVES = ("throughput", "cost", "fastest")
WANDB_MODES = ("offline", "online", "disabled")
PROFILES = ("none", "torch", "pyspy", "nsys")


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


def _is_import_path(value: Any) -> bool:
    """'package.module:name' with both parts non-empty."""
    module, sep, name = str(value).partition(":")
    return bool(sep and module.strip() and name.strip() and ":" not in name)


MAX_NAME = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def name_problem(value: Any) -> Optional[str]:
    """What keeps `value` from being a plain name (a folder of its own under results_dir), or None."""
    text = str(value)
    if len(text) > MAX_NAME:
        return f"is {len(text)} characters long, more than {MAX_NAME}"
    if "/" in text or "\\" in text or ".." in text:
        return f"must be a plain name, not a path, got {text!r}"
    if not _NAME.fullmatch(text):
        return (f"must be a plain name of ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, "
                f"got {text!r}")
    return None


def name_line(key: str, value: Any) -> Optional[str]:
    """The line that refuses `value` for a key that takes a plain name, or None."""
    problem = name_problem(value)
    return None if problem is None else f"{key}: {problem}; give a short name such as nightly-loaders"


def _require_name(key: str, value: Any) -> None:
    line = name_line(key, value)
    if line is not None:
        raise ConfigError(line)


PATH_KEYS = frozenset({"results_dir", "data.cache_dir", "data.url", "history.dir", "wandb.dir", "overnight.lock_file",
                       "train.deepspeed_config", "resume"})    # keys whose text is a path (~ expanded)


def home_problem(value: Any) -> Optional[str]:
    """What keeps a path that starts with ~user from naming a folder: a user this machine does not
    know (pathlib's expanduser raises then, and os.path's leaves a folder literally named ~user)."""
    text = str(value)
    if not text.startswith("~") or os.path.expanduser(text) != text:
        return None
    return f"{text.split('/')[0]} is no user of this machine; give the folder as a full path"
