"""Each config key's role, declared once; the cell id, the grid's axes and every view derive from it.

Four roles:

- measurement: what a trial measures. Only these make a cell's identity (plan.cell_id), only
  these are a grid's axes, and only these are shown on trial lines and in tables.
- placement: where and how a trial runs (Ray, the executor, time limits, retries, the shard
  cache). Two trials that differ only here measure the same cell.
- output: how results are judged and where they go (results_dir, analysis, cost, W&B, MLflow,
  the report, history).
- run control: the run's course (its name and id, repeats, order, resume, dry_run, the suite).

The longest declared prefix of a key decides, so a key the tool gains takes its section's
role. A trial's share of the machine (resources.isolation, cpus, gpus) changes what it
measures (its neighbours, its CPUs and threads), so it is a measurement, as cell ids have
always counted it.
"""
from __future__ import annotations

import enum
from typing import Dict, Iterable, List


class Role(str, enum.Enum):
    MEASUREMENT = "measurement"
    PLACEMENT = "placement"
    OUTPUT = "output"
    RUN_CONTROL = "run control"


M, P, O, R = Role.MEASUREMENT, Role.PLACEMENT, Role.OUTPUT, Role.RUN_CONTROL

ROLES: Dict[str, Role] = {
    # what a trial measures
    "workload": M, "data": M, "train": M, "probe": M,
    "resources.isolation": M, "resources.cpus": M, "resources.gpus": M,
    # where and how it runs
    "resources": P, "workload.spec": P, "data.cache_dir": P, "train.dist_timeout_s": P,
    "ray": P, "executor": P,
    # how results are judged and where they go
    "results_dir": O, "analysis": O, "cost": O, "wandb": O, "mlflow": O, "report": O, "history": O,
    # the run's course
    "sweep": R, "run_id": R, "dry_run": R, "repeats": R, "order": R, "order_seed": R, "resume": R,
    "sequential": R, "overnight": R, "hydra": R,
}


def key_role(dotted: str) -> Role:
    """The role of a dotted key, e.g. key_role("data.num_workers") is Role.MEASUREMENT and
    key_role("wandb.enabled") Role.OUTPUT. An override's text works too ("+data.x=1", "~sweep").
    A key under no declared prefix is run control: it can never rename a cell."""
    parts = dotted.split("=", 1)[0].lstrip("+~").split(".")
    for n in range(len(parts), 0, -1):
        role = ROLES.get(".".join(parts[:n]))
        if role is not None:
            return role
    return Role.RUN_CONTROL


def is_measurement(dotted: str) -> bool:
    """Whether a key (or an override) sets what a trial measures: part of its cell's identity."""
    return key_role(dotted) is Role.MEASUREMENT


def shapes_trials(dotted: str) -> bool:
    """Whether a key changes what a trial measures or where and how it runs (measurement or
    placement), not how results are judged, where they go or the run's course: the settings that
    compare and the history name when two runs differ."""
    return key_role(dotted) in (Role.MEASUREMENT, Role.PLACEMENT)


def measurement_keys(keys: Iterable[str]) -> List[str]:
    """The measurement settings among `keys`, in their order (what trial lines and tables show)."""
    return [k for k in keys if is_measurement(k)]
