"""What a command line lets start before Hydra composes, read from argv alone (sweeper/__main__.py):
where it may run a sweep on a local Ray, the node zygote, whose imports (torch: seconds) then
overlap the composing instead of following it; where it runs its trials in this process on a GPU
(executor=local), CUDA's start (sweeper/cudastart.py).

Conservative: a flag other than -m and the config-source ones (--help, --cfg, --info, ...), a dry
run, another executor, an attached cluster, a runtime_env, a suite, another launcher or an
override it cannot read each rule it out. What only a config file says (a sweep file's
executor=local, a CPU device) argv cannot tell: a zygote started then is ended unused
(sweeper/nodezygote.py), and a CUDA context let go before the first trial that needs no GPU.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from sweeper.envvars import ray_address

RUN_FLAGS = frozenset({"-m", "--multirun"})
SOURCE_FLAGS = frozenset({"-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir"})  # take a value
FALSE = frozenset({"false", "no", "off", "0"})        # what OmegaConf reads as a bool's false
NULL = frozenset({"null", "~", ""})
RAY_ONLY = {"dry_run": FALSE, "executor": frozenset({"ray"}), "ray.address": NULL}   # key -> the values that keep it
IN_PROCESS_ONLY = {"dry_run": FALSE, "executor": frozenset({"local"}), "workload.device": frozenset({"auto", "cuda"})}
NO_GPU = frozenset({"0", "0.0"})


def begin(args: Sequence[str]) -> None:
    """What the command does before it imports Hydra, run as `python -m sweeper` or as the `sweeper`
    script (sweeper/console.py): Python's young generation widened for its imports
    (sweeper/youngcollector.py), then the head start for `args`."""
    from sweeper import youngcollector

    youngcollector.widen_for_start()
    head_start_for(args)


def head_start_for(args: Sequence[str]) -> None:
    """Starts what `args` will need before Hydra composes them: the node zygote, or CUDA."""
    if not start_spare_for(args) and may_run_in_process_on_a_gpu(args):
        from sweeper import cudastart

        if cudastart.visible_gpus():
            cudastart.start()


def start_spare_for(args: Sequence[str]) -> bool:
    """Starts the node zygote (sweeper/nodezygote.py) where `args` may sweep on a local Ray; whether
    they may. A second call starts no second one."""
    if not may_run_on_local_ray(args):
        return False
    from sweeper.nodezygote import start_spare

    start_spare()
    return True


def may_run_on_local_ray(args: Sequence[str]) -> bool:
    """Whether `args` (the command line after `python -m sweeper`) may start trials on a local Ray:
    not where RAY_ADDRESS names a cluster (conf/config.yaml's default for ray.address) and `args`
    leave ray.address unsaid."""
    overrides = _overrides(args)
    if overrides is None or (ray_address() and not any(key == "ray.address" for key, _ in overrides)):
        return False
    return all(_override_allows(key, value, RAY_ONLY) for key, value in overrides)


def may_run_in_process_on_a_gpu(args: Sequence[str]) -> bool:
    """Whether `args` ask for executor=local, whose trials run in this process, and leave them a GPU."""
    overrides = _overrides(args)
    return (overrides is not None and ("executor", "local") in overrides
            and all(_override_allows(key, value, IN_PROCESS_ONLY) for key, value in overrides)
            and not any(key == "resources.gpus" and value in NO_GPU for key, value in overrides))


def _overrides(args: Sequence[str]) -> Optional[List[Tuple[str, str]]]:
    """The (key, value) overrides of a command line that sweeps; None where a flag or something
    that is no override (a deletion, a stray word) may make it do something else."""
    rest, out = list(args), []
    while rest:
        arg = rest.pop(0)
        if arg in SOURCE_FLAGS:
            rest = rest[1:]                             # its value
        elif arg.split("=", 1)[0] in SOURCE_FLAGS or arg in RUN_FLAGS:
            continue
        elif arg.startswith("-"):
            return None
        else:
            key, sep, value = arg.partition("=")
            if not sep or key.startswith("~"):          # a deletion, or not an override at all
                return None
            out.append((key.lstrip("+"), value.strip().strip("'\"").lower()))
    return out


def _override_allows(key: str, value: str, only: dict) -> bool:
    """Whether one override leaves the sweep where `only` (key -> the values that keep it) wants it."""
    if key in only:
        return value in only[key]
    if key in ("sweep", "sweep@_global_"):
        return "overnight" not in value                  # the suite runs each sweep as a command of its own
    return not (key in ("ray", "overnight") or key.startswith(("ray.runtime_env", "ray.address.", "overnight.",
                                                               "hydra/launcher", "hydra/sweeper")))
