"""Pure planning: composed configs -> trials with stable ids and resource requests.

No Ray, no files, no clocks: the launcher hands in the cluster's shape and gets
back what to submit, so every rule here is tested as a table of cases.
"""
from __future__ import annotations

import hashlib
import json
import copy
import dataclasses
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from sweeper.analysis import strata as stratum_rules
from sweeper.errors import ConfigError
from sweeper.schema import TRIAL_SECTIONS, TrialConfig, is_measurement, key_role, swept_value, trial_config
from sweeper.spec import Wants, declared, spec_for


@dataclass(frozen=True)
class ClusterShape:
    """What the scheduler can place onto: per-node CPU and GPU counts."""
    node_cpus: Sequence[float]
    node_gpus: Sequence[float]
    node_ids: Sequence[str] = ()       # the scheduler's ids of the nodes, where it has them (Ray)

    @property
    def has_gpus(self) -> bool:
        return any(g > 0 for g in self.node_gpus)


@dataclass
class Trial:
    index: int
    trial_id: str                      # <cell_id>-<repeat>
    overrides: List[str]
    swept: Dict[str, Any]
    config: TrialConfig
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    infeasible: Optional[str] = None
    cell_id: str = ""
    repeat: int = 0
    is_baseline: bool = False
    workload: str = ""                 # its spec's name
    node: Optional[str] = None         # the fleet: the node this trial is pinned to (resources.every_device)
    group: str = ""                    # the fleet: trials that start together, one per device (cell-repeat)

    def measured_overrides(self) -> List[str]:
        """Its overrides that set what it measures (what a plan line shows; sweeper.schema.roles)."""
        return [o for o in self.overrides if is_measurement(override_key(o))]

    def spec(self, sweep: str, run_id: str, driver_pid: Optional[int] = None) -> Dict[str, Any]:
        """What the trial runner (sweeper.trial.execute) receives."""
        workload = spec_for(self.config.workload)
        return {"trial_id": self.trial_id, "cell_id": self.cell_id, "repeat": self.repeat,
                "is_baseline": self.is_baseline, "index": self.index, "config": self.config,
                "overrides": self.overrides, "swept": self.swept, "num_cpus": self.num_cpus,
                "num_gpus": self.num_gpus, "sweep": sweep, "run_id": run_id, "driver_pid": driver_pid,
                "workload_spec": workload.describe(), "preload": list(workload.preload), "node": self.node}


def cell_id(cfg: TrialConfig, workload: str) -> str:
    """Stable id of what a trial measures: its workload's name and the settings in which it
    differs from the schema's defaults, in the sections it carries (docs/record.md).

    A key the tool gains later has a default, and a section this workload does not use
    is not in its config, so neither renames an existing cell."""
    canonical = json.dumps({"workload": workload, "settings": cell_settings(cfg)}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha1(canonical.encode()).hexdigest()[:12]


def cell_settings(cfg: TrialConfig) -> Dict[str, Any]:
    """Dotted key -> value of every measurement setting (sweeper.schema.roles) that differs from its default."""
    out: Dict[str, Any] = {}
    for section in TRIAL_SECTIONS:
        value = getattr(cfg, section)
        if value is not None:
            out.update(_non_default(value, type(value)(), section))
    return {k: v for k, v in out.items() if is_measurement(k)}


def _non_default(value: Any, default: Any, prefix: str) -> Dict[str, Any]:
    if dataclasses.is_dataclass(value):
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(value):
            out.update(_non_default(getattr(value, f.name), getattr(default, f.name, _MISSING), f"{prefix}.{f.name}"))
        return out
    if isinstance(value, dict) and value:
        base = default if isinstance(default, dict) else {}
        out = {}
        for key, item in value.items():
            out.update(_non_default(item, base.get(key, _MISSING), f"{prefix}.{key}"))
        return out
    return {} if value == default else {prefix: value}


_MISSING = object()


def override_key(override: str) -> str:
    """'data.num_workers=2' -> 'data.num_workers' (also '+key=v', '++key=v', '~key')."""
    key = override.split("=", 1)[0]
    return key.lstrip("+~")


def swept_keys(all_overrides: Sequence[Sequence[str]]) -> List[str]:
    """The measurement settings that define grid points: those whose value differs between jobs,
    or, for a single job, every one the user set. Group choices (+sweep=...) and the keys of
    other roles (sweep.name, wandb.enabled, resources.timeout_s...) are not axes."""
    seen: Dict[str, set] = {}
    for overrides in all_overrides:
        for o in overrides:
            key = override_key(o)
            if "=" in o and "." in key and is_measurement(key):
                seen.setdefault(key, set()).add(o.split("=", 1)[1])
    varying = [k for k, values in seen.items() if len(values) > 1]
    return varying if varying or len(all_overrides) > 1 else list(seen)


def swept_values(cfg: TrialConfig, keys: Sequence[str]) -> Dict[str, Any]:
    return {k: swept_value(cfg, k) for k in keys}


def request(cfg: TrialConfig, wants: Wants, cluster: ClusterShape) -> tuple[float, float]:
    """(num_cpus, num_gpus) for the executor: the workload's wants, the user's explicit
    resources.cpus/gpus, shaped by the isolation mode and the cluster."""
    biggest = max(cluster.node_cpus, default=1.0)
    wanted = float(cfg.resources.cpus) if cfg.resources.cpus is not None else wants.cpus
    cpus = min(wanted, biggest)        # a 2-core laptop still runs num_workers=8
    if cfg.resources.gpus is not None:
        gpus = float(cfg.resources.gpus)
    else:
        gpus = wants.gpus if cluster.has_gpus else 0.0
    mode = cfg.resources.isolation
    if mode == "node":
        # Asking for a whole node's CPUs keeps other trials off it while this one runs.
        cpus = max(cpus, min(cluster.node_cpus, default=cpus))
    elif mode == "gpu" and gpus > 0:
        gpus = float(max(1, round(gpus)))
    return cpus, gpus


def planned_device(cfg: TrialConfig, num_gpus: float) -> str:
    """The device a trial will run on: workload.device, or for "auto" whether it gets a GPU."""
    if cfg.workload.device != "auto":
        return cfg.workload.device
    return "cuda" if num_gpus > 0 else "cpu"


def infeasible_reason(num_cpus: float, num_gpus: float, cluster: ClusterShape, device: str = "auto") -> Optional[str]:
    """Ray would leave such a request pending for ever, so say so before submitting; a CUDA
    trial given no GPU would start only to fail, so say that too."""
    if device == "cuda" and num_gpus <= 0:
        return "workload.device=cuda but the trial gets no GPU; give it resources.gpus=1 or workload.device=auto"
    if num_gpus > max(cluster.node_gpus, default=0.0):
        return f"asks for {num_gpus:g} GPU(s) but no node has more than {max(cluster.node_gpus, default=0.0):g}"
    if num_cpus > max(cluster.node_cpus, default=0.0):
        return f"asks for {num_cpus:g} CPU(s) but no node has more than {max(cluster.node_cpus, default=0.0):g}"
    return None


def check_workload(root, cluster: ClusterShape) -> None:
    """One job's plan-time checks of its workload (its spec's validate) on `cluster`: the first
    job's, before a local Ray is started early, so that its bad input is one line at once rather
    than after Ray's start. plan_cells runs the same checks on every job. A target of the user's
    own, whose spec only its module has, is left to them: importing it (torch, say) here would
    hold Ray's start back."""
    spec = declared(root.workload)
    if spec is not None:
        _checked(root, spec, cluster)


def _checked(root, spec, cluster: ClusterShape) -> tuple:
    """A job's trial config, its request (cpus, gpus) and device, once its spec's checks pass."""
    cfg = trial_config(root, spec.sections)
    cpus, gpus = request(cfg, spec.resources(cfg), cluster)
    device = planned_device(cfg, gpus)
    spec.validate(root, device)
    return cfg, cpus, gpus, device


def plan_cells(jobs: Sequence[tuple[Sequence[str], TrialConfig]], cluster: ClusterShape) -> List[Trial]:
    """One Trial per job (overrides, checked config): the grid points, repeat 0, in grid order.
    Each trial gets its own config with only the sections its workload's spec names."""
    cells, keys = [], swept_keys([o for o, _ in jobs])
    seen: Dict[str, Sequence[str]] = {}
    for index, (overrides, root) in enumerate(jobs):
        spec = spec_for(root.workload)
        cfg, cpus, gpus, device = _checked(root, spec, cluster)
        cid = cell_id(cfg, spec.name)
        if cid in seen:
            raise same_cell_error(seen[cid], overrides)
        seen[cid] = overrides
        cells.append(Trial(
            index=index, trial_id=f"{cid}-0", overrides=list(overrides),
            swept=swept_values(root, keys), config=cfg, num_cpus=cpus, num_gpus=gpus,
            infeasible=infeasible_reason(cpus, gpus, cluster, device), cell_id=cid, workload=spec.name,
        ))
    return cells


def same_cell_error(first: Sequence[str], second: Sequence[str]) -> ConfigError:
    """Two grid points that measure one cell: the second would replace the first's results.
    Names the key whose values differ but measure the same (an output or placement setting,
    or two spellings of one value), else the repeated point itself (data.num_workers=1,1)."""
    a, b = _by_key(first), _by_key(second)
    differing = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    if differing:
        key = differing[0]
        values = f"the values {a.get(key, '(unset)')} and {b.get(key, '(unset)')}"
        if is_measurement(key):
            return ConfigError(f"{key}: {values} are one setting, so both grid points are one cell; give each value once")
        return ConfigError(f"{key}: {values} make one cell, since {key} is {_a(key_role(key).value)} setting, not a "
                           f"measurement; give it one value, and sweep measurement settings only")
    point = " ".join(o for o in second if is_measurement(override_key(o))) or " ".join(second) or "(defaults)"
    return ConfigError(f"{point}: this grid point is listed twice, so its second run would replace the first; "
                       f"give each value once (e.g. data.num_workers=1,2, not 1,1)")


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _by_key(overrides: Sequence[str]) -> Dict[str, str]:
    return {override_key(o): o.split("=", 1)[1] if "=" in o else "" for o in overrides}


def default_distance(cell: Trial) -> int:
    """How many swept values differ from the schema's defaults (PyTorch's, for the loader)."""
    defaults = TrialConfig()
    return sum(1 for key, value in cell.swept.items() if swept_value(defaults, key) != value)


def _value(cell: Trial, key: str) -> Any:
    if key == stratum_rules.WORKLOAD:
        return cell.workload
    column = stratum_rules.resolve(key, list(cell.swept))
    return cell.swept[column] if column is not None else swept_value(cell.config, key)


def _lookup(cell: Trial) -> stratum_rules.Lookup:
    return lambda key: _value(cell, key)


def pick_baseline(cells: Sequence[Trial], spec: Optional[str]) -> int:
    """Index of the baseline cell: the one `spec` ("key=value key=value") names (the rule of
    sweeper.analysis.strata), else the grid point nearest the defaults (the first such, in grid order)."""
    if spec:
        found = stratum_rules.first_match([_lookup(c) for c in cells], spec)
        if found is None:
            raise ConfigError(f"analysis.baseline={spec!r} matches no grid point of this sweep; name one with the "
                              f"grid's own keys and values (dry_run=true lists them), or leave it out (the point "
                              f"nearest the defaults)")
        return found
    return min(range(len(cells)), key=lambda i: (default_distance(cells[i]), i))


def strata_of(cells: Sequence[Trial], compare_within: Sequence[str]) -> List[List[int]]:
    """Cell indices per stratum, in grid order (sweeper.analysis.strata). One stratum without."""
    keys = stratum_rules.strata_keys(compare_within, len({c.workload for c in cells}))
    return stratum_rules.groups([_lookup(c) for c in cells], keys)


def pick_baselines(cells: Sequence[Trial], spec: Optional[str], compare_within: Sequence[str] = ()) -> List[int]:
    """One baseline per stratum of two cells or more (a lone cell is compared with nothing): the
    cell `spec` names with the stratum's own values of the strata keys, else the one nearest the
    defaults. Without strata: `pick_baseline`."""
    strata = strata_of(cells, compare_within)
    if len(strata) == 1:
        return [pick_baseline(cells, spec)]
    wanted = stratum_rules.within_stratum(spec, [*compare_within, stratum_rules.WORKLOAD])
    out = []
    for members in strata:
        if len(members) < 2:
            continue
        mine = [cells[i] for i in members]
        try:
            out.append(members[pick_baseline(mine, wanted)])
        except ConfigError:
            raise ConfigError(f"analysis.baseline={spec!r} matches no grid point of the stratum "
                              f"{_stratum_text(mine[0], compare_within)} (analysis.compare_within); name one of "
                              f"every stratum (dry_run=true lists them), or leave it out") from None
    return out


def check_compare_within(cells: Sequence[Trial], keys: Sequence[str]) -> None:
    """Each key of analysis.compare_within names a key of the trial config (a typo would
    otherwise split nothing, silently)."""
    for key in keys:
        if key == "workload" or not cells:
            continue
        node: Any = cells[0].config
        for part in key.split("."):
            found = part in node if isinstance(node, dict) else hasattr(node, part)
            if not found:
                raise ConfigError(f"analysis.compare_within: {key!r} names no key of the trial config; "
                                  f"give dotted keys such as data.kind")
            node = node[part] if isinstance(node, dict) else getattr(node, part)


def _stratum_text(cell: Trial, keys: Sequence[str]) -> str:
    return " ".join(f"{k}={_value(cell, k)}" for k in keys) or f"workload={cell.workload}"


def _repeat_of(cell: Trial, repeat: int) -> Trial:
    return dataclasses.replace(cell, trial_id=f"{cell.cell_id}-{repeat}", repeat=repeat)


def expand_repeats(cells: Sequence[Trial], repeats: int, baseline: Union[None, int, Sequence[int]],
                   double_baseline: bool, order: str = "interleaved", seed: int = 0) -> List[Trial]:
    """Each cell `repeats` times (the baseline, or each stratum's, twice as often when asked), as rounds.

    In "interleaved" order each round holds every cell once (the baseline twice)
    in a shuffled order, so slow drift of the machine spreads over all cells
    instead of looking like an effect of whichever ran last."""
    rng = random.Random(seed)
    bases = [] if baseline is None else [baseline] if isinstance(baseline, int) else list(baseline)
    trials: List[Trial] = []
    for r in range(repeats):
        batch = [_repeat_of(c, r) for c in cells]
        if double_baseline:
            batch += [_repeat_of(cells[b], repeats + r) for b in bases]
        if order == "interleaved":
            rng.shuffle(batch)
        trials += batch
    if order == "grid":
        trials.sort(key=lambda t: (t.index, t.repeat))
    base_ids = {cells[b].cell_id for b in bases}
    for t in trials:
        t.is_baseline = t.cell_id in base_ids
    return trials


def plan_trials(jobs: Sequence[tuple[Sequence[str], TrialConfig]], cluster: ClusterShape,
                repeats: int = 1, baseline: Optional[str] = None, order: str = "grid",
                seed: int = 0, compare_within: Sequence[str] = ()) -> List[Trial]:
    """Grid points x repeats, in submission order. With repeats > 1 the baseline cell (each
    stratum's, with analysis.compare_within) runs twice as often, so its two halves give the noise floor."""
    cells = plan_cells(jobs, cluster)
    check_compare_within(cells, compare_within)
    bases = pick_baselines(cells, baseline, compare_within) if cells else []
    double = repeats > 1 and len(cells) > 1
    return expand_repeats(cells, repeats, bases, double, order, seed)


def shrunk(trial: Trial) -> Optional[Trial]:
    """The retry of an out-of-memory trial, as its workload's spec shrinks it; None when it cannot."""
    spec = spec_for(trial.config.workload)
    changes = spec.shrink(trial.config) if spec.shrink is not None else None
    if not changes:
        return None
    cfg = copy.deepcopy(trial.config)
    for dotted, value in changes.items():
        section, _, key = dotted.rpartition(".")
        setattr(swept_value(cfg, section), key, value)
    extra = [f"{k}={v}" for k, v in changes.items()]
    overrides = [o for o in trial.overrides if override_key(o) not in changes] + extra
    cid = cell_id(cfg, spec.name)
    return dataclasses.replace(trial, config=cfg, cell_id=cid, trial_id=f"{cid}-{trial.repeat}", overrides=overrides)


# -- the fleet (resources.every_device) -------------------------------------------------
def fleet_targets(trial: Trial, cluster: ClusterShape) -> List[tuple[Optional[str], int]]:
    """(node id, slot) for each device a trial of this cell runs on: every whole GPU request
    that fits on each node for a GPU cell, each node once for a CPU cell. Which GPU a slot
    gets is Ray's choice; the record names it (its fingerprint's GPU UUID)."""
    ids: List[Optional[str]] = list(cluster.node_ids) or [None] * len(cluster.node_cpus)
    if trial.num_gpus <= 0:
        return [(node, 0) for node in ids]
    return [(node, slot) for node, gpus in zip(ids, cluster.node_gpus)
            for slot in range(int(gpus // trial.num_gpus))]


def spread_over_fleet(trials: Sequence[Trial], cluster: ClusterShape) -> List[Trial]:
    """Each trial once per device (fleet_targets), as a group that starts together; the
    trial id gains the node's and the slot's index so every one has a folder of its own."""
    out: List[Trial] = []
    for trial in trials:
        group = f"{trial.cell_id}-{trial.repeat}"
        ids = list(cluster.node_ids) or [None] * len(cluster.node_cpus)
        for node, slot in fleet_targets(trial, cluster):
            where = f"n{ids.index(node)}" + (f"g{slot}" if trial.num_gpus > 0 else "")
            out.append(dataclasses.replace(trial, trial_id=f"{group}-{where}", node=node, group=group))
    return out


# -- repeats=auto (sweeper/rounds.py) ---------------------------------------------------
def next_repeat(cell: Trial, repeat: int) -> Trial:
    """Repeat number `repeat` of a cell (the template: any trial of it)."""
    return _repeat_of(dataclasses.replace(cell, node=None, group=""), repeat)
