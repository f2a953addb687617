"""Whether a command line may run a sweep on a local Ray, read from argv alone, before Hydra
composes: then the node zygote starts at once (sweeper/__main__.py), its imports (torch: seconds)
overlapping the composing instead of following it.

Conservative: a flag other than -m and the config-source ones (--help, --cfg, --info, ...), a dry
run, another executor, an attached cluster, a runtime_env, a suite, another launcher or an
override it cannot read each rule it out. What only a config file says (a sweep file's
executor=local) argv cannot tell: a zygote started then is ended unused (sweeper/nodezygote.py).
"""
from __future__ import annotations

from typing import Sequence

RUN_FLAGS = frozenset({"-m", "--multirun"})
SOURCE_FLAGS = frozenset({"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"})  # take a value
FALSE = frozenset({"false", "no", "off", "0"})        # what OmegaConf reads as a bool's false
NULL = frozenset({"null", "~", ""})
ONLY = {"dry_run": FALSE, "executor": frozenset({"ray"}), "ray.address": NULL}   # key -> the values that keep it


def start_spare_for(args: Sequence[str]) -> bool:
    """Starts the node zygote (sweeper/nodezygote.py) where `args` may sweep on a local Ray; whether
    they may. A second call starts no second one."""
    if not may_run_on_local_ray(args):
        return False
    from sweeper.nodezygote import start_spare

    start_spare()
    return True


def may_run_on_local_ray(args: Sequence[str]) -> bool:
    """Whether `args` (the command line after `python -m sweeper`) may start trials on a local Ray."""
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in SOURCE_FLAGS:
            rest = rest[1:]                             # its value
        elif arg.split("=", 1)[0] in SOURCE_FLAGS or arg in RUN_FLAGS:
            continue
        elif arg.startswith("-") or not _override_allows(arg):
            return False
    return True


def _override_allows(arg: str) -> bool:
    """Whether one `key=value` override leaves the sweep on a local Ray."""
    key, sep, value = arg.partition("=")
    key, value = key.lstrip("+"), value.strip().strip("'\"").lower()
    if not sep or key.startswith("~"):                  # a deletion, or not an override at all
        return False
    if key in ONLY:
        return value in ONLY[key]
    if key in ("sweep", "sweep@_global_"):
        return "overnight" not in value                  # the suite runs each sweep as a command of its own
    return not (key in ("ray", "overnight") or key.startswith(("ray.runtime_env", "ray.address.", "overnight.",
                                                               "hydra/launcher", "hydra/sweeper")))
