"""Workload specs: what the core needs to know about a workload, declared by the workload.

The core (plan, driver, zygote, views) never names a workload. Each one, shipped or a
user's, declares in a `WorkloadSpec`:

- `sections`: the root config sections it reads besides workload/resources/probe (the
  trial's config carries only those, and only those shape its cell id);
- `params`: a dataclass that checks `workload.params` (a user's own typed section);
- `check`: checks across sections, run on every job before any trial starts;
- `check_device`: checks that need the device the trial will get ("cpu" or "cuda", from
  `workload.device` or the cluster's GPUs), run at the same time;
- `resources`: its CPU and GPU wants from its own knobs;
- `preload`: modules the zygote may import before forking trials (never anything that
  starts CUDA: a process that initialised CUDA must not fork);
- `shrink`: the overrides of its out-of-memory retry (None: cannot shrink);
- `items_label`, `headline`, `memory`: how the views name its throughput, which of its
  figures they show, and which peak memory is its own;
- `pairs`: the comparisons a microbenchmark times side by side in one trial (pinned against
  pageable copies, ...): the views end with each one's ratio.

Where a spec comes from: `workload.spec=module:NAME` when set and made for this target,
else `SPEC` in the target's module, else `DEFAULT_SPEC` (a function over the shared
`data` section).
Nothing here imports torch, Ray or Hydra.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from sweeper.errors import ConfigError

# [figure key in the record's figures, column label, scale, digits]
Column = Tuple[str, str, float, int]


@dataclass(frozen=True)
class Wants:
    """A trial's wants before isolation and the cluster shape: CPUs, and GPUs when there are any."""
    cpus: float = 1.0
    gpus: float = 1.0


def _default_resources(cfg) -> Wants:
    return Wants(cpus=float(cfg.data.num_workers + 1) if cfg.data is not None else 1.0, gpus=1.0)


def _halve_batch(cfg) -> Optional[Dict[str, Any]]:
    if cfg.data is None or cfg.data.batch_size <= 1:
        return None
    return {"data.batch_size": cfg.data.batch_size // 2}


@dataclass(frozen=True)
class Pair:
    """Two of a trial's figures compared as a / b: `a` and `b` name each side ("pinned"), the
    keys are figure keys, `unit` says what the ratio is of ("GB/s", "time per access")."""
    a: str
    a_key: str
    b: str
    b_key: str
    unit: str


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    target: Optional[str] = None         # the function it describes; a spec named for another target is passed over
    sections: Tuple[str, ...] = ()
    params: Optional[type] = None
    check: Optional[Callable[[Any], None]] = None
    check_device: Optional[Callable[[Any, str], None]] = None   # (cfg, "cpu" | "cuda"): checks that need the device
    resources: Callable[[Any], Wants] = lambda cfg: Wants()
    preload: Tuple[str, ...] = ()
    shrink: Optional[Callable[[Any], Optional[Dict[str, Any]]]] = None
    items_label: str = "items"
    headline: Tuple[Column, ...] = ()
    memory: str = "host_mem_gb"          # or "gpu_mem_gb": the analysis' per-cell peak memory columns
    pairs: Tuple[Pair, ...] = ()

    def describe(self) -> Dict[str, Any]:
        """What the trial record carries for the views (they import no workload)."""
        return {"name": self.name, "items_label": self.items_label,
                "headline": [list(c) for c in self.headline], "memory": self.memory,
                "pairs": [[p.a, p.a_key, p.b, p.b_key, p.unit] for p in self.pairs]}

    def validate(self, cfg, device: Optional[str] = None) -> None:
        """Checks before any trial starts: the typed params section, then the workload's own
        (with the trial's device, when the plan knows it)."""
        if self.params is not None:
            typed_params(self.params, cfg.workload.params)
        if self.check is not None:
            self.check(cfg)
        if self.check_device is not None and device is not None:
            self.check_device(cfg, device)


DEFAULT_SPEC = WorkloadSpec(
    name="function", sections=("data",), resources=_default_resources, shrink=_halve_batch,
    headline=(("time_to_first_batch_s", "first batch s", 1.0, 3),))


@dataclass(frozen=True)
class NoParams:
    """The params of a workload that reads none (its settings have sections of their own):
    any key under workload.params is a typo or a setting in the wrong place."""


def typed_params(cls: type, values: Dict[str, Any]):
    """workload.params as the workload's dataclass, naming the key it rejects."""
    known = {f.name for f in dataclasses.fields(cls)}
    for key in values:
        if key not in known and not known:
            raise ConfigError(f"workload.params.{key}: this workload reads no workload.params; remove it, or set "
                              f"the key in the workload's own section (data.*, train.*)")
        if key not in known:
            raise ConfigError(f"workload.params.{key}: unknown key; valid keys: {sorted(known)}")
    obj = cls(**values)
    if hasattr(obj, "check"):
        obj.check()
    return obj


_LOADED: Dict[Tuple[Optional[str], str], WorkloadSpec] = {}


def spec_for(workload_cfg) -> WorkloadSpec:
    """The spec of a workload config (`workload.spec`, else the target module's SPEC)."""
    key = (workload_cfg.spec, workload_cfg.target)
    if key not in _LOADED:
        _LOADED[key] = _load(*key)
    return _LOADED[key]


def declared(workload_cfg) -> Optional[WorkloadSpec]:
    """The spec `workload.spec` names for this target, found without importing the target's
    module; None where only that module can say (a target of the user's own)."""
    key = (workload_cfg.spec, workload_cfg.target)
    return _LOADED[key] if key in _LOADED else _declared(*key)


def _declared(spec_path: Optional[str], target: str) -> Optional[WorkloadSpec]:
    if not spec_path:
        return None
    module_name, _, attr = spec_path.partition(":")
    found = getattr(_import(module_name, "workload.spec", spec_path), attr or "SPEC", None)
    if not isinstance(found, WorkloadSpec):
        raise ConfigError(f"workload.spec={spec_path!r}: no WorkloadSpec named {attr or 'SPEC'!r} there")
    if found.target not in (None, target):
        return None
    _check_findable(target)
    return found


def _load(spec_path: Optional[str], target: str) -> WorkloadSpec:
    """A config group's spec describes its own target; with the target overridden
    (workload.target=my_bench:run), the spec comes from the new target's module."""
    found = _declared(spec_path, target)
    if found is not None:
        return found
    module_name, _, function = target.partition(":")
    module = _import(module_name, "workload.target", target)
    _check_callable(module, function, target)
    found = getattr(module, "SPEC", None)
    return found if isinstance(found, WorkloadSpec) else DEFAULT_SPEC


def _check_findable(target: str) -> None:
    """A target its spec describes is not imported while planning (it may import torch), but its
    module must be there."""
    module_name = target.partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(f"workload.target={target!r}: no module {module_name!r} on the path; "
                          f"is it on PYTHONPATH (run from its folder)?")


def found_unrun(module_name: str) -> bool:
    """Whether a module can be found without running it or the packages above it (find_spec runs
    the parents: for the overnight suite's shipped hook, sweeper.history and with it pandas)."""
    from importlib.machinery import PathFinder

    first, *rest = module_name.split(".")
    spec = importlib.util.find_spec(first)          # a top-level name: nothing is run
    for part in rest:
        places = spec.submodule_search_locations if spec is not None else None
        spec = PathFinder.find_spec(f"{spec.name}.{part}", places) if places is not None else None
    return spec is not None


def _check_callable(module, function: str, target: str) -> None:
    """The target names a function of its module, found before any trial starts."""
    found = getattr(module, function, None)
    if found is None:
        raise ConfigError(f"workload.target={target!r}: module {module.__name__!r} has no {function!r}; "
                          f"name one of its functions after the ':'")
    if not callable(found):
        raise ConfigError(f"workload.target={target!r}: {function!r} is a {type(found).__name__}, not a function; "
                          f"name a function (cfg, probe) -> dict")


def _import(module_name: str, key: str, value: str):
    """The module, or one line naming the key: ImportError, or whatever the module raised
    while importing (a SyntaxError, an exception at its top level)."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{key}={value!r}: cannot import {module_name!r} ({_one_line(exc)}); "
                          f"is it on PYTHONPATH (run from its folder)?") from None
    except Exception as exc:
        raise ConfigError(f"{key}={value!r}: importing {module_name!r} raised {type(exc).__name__}: "
                          f"{_one_line(exc)}; fix the module (python -c 'import {module_name}' shows where)") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def preload_of(specs: List[WorkloadSpec]) -> List[str]:
    out: List[str] = []
    for spec in specs:
        out += [m for m in spec.preload if m not in out]
    return out


__all__ = ["Column", "Pair", "Wants", "WorkloadSpec", "DEFAULT_SPEC", "NoParams", "spec_for", "typed_params", "preload_of"]
