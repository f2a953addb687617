"""Executors: where and how trials run. The driver talks to one through `Executor` (base.py).

- `ray` (default, sweeper/executors/ray_executor.py, the only module that imports Ray):
  each trial a Ray task, forked from a warm zygote into a contained process of its own.
- `local` (sweeper/executors/local.py): trials one at a time inside the driver's own
  process, so a debugger's breakpoint or a profiler sees the workload.

To add one: subclass `Executor`, give it a name in `make_executor`, add the name to
`schema.EXECUTORS`. Both shipped executors feed the same driver, so the summary, tables,
exit codes and publishers are the same whichever ran the trials.

A head start: inside the launcher's `head_start()`, the first composed and checked job calls
`begin_early`, so that Ray and the node zygote start while the other jobs are composed and all
are checked and planned; `make_executor` then hands that executor over instead of starting another.
The node zygote may have started before, with the command (sweeper/nodezygote.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Optional, Sequence

from sweeper.executors.base import Executor, NodeLost, TrialLost
from sweeper.nodezygote import end_spare
from sweeper.timeline import mark

__all__ = ["Executor", "NodeLost", "TrialLost", "make_executor", "head_start", "begin_early", "runs_on_ray"]

_EARLY: Optional[Executor] = None      # begun by begin_early, not yet taken by make_executor
_ARMED = False                         # inside the launcher's head_start


def make_executor(root, preload: Sequence[str]) -> Executor:
    if root.executor == "local":
        from sweeper.executors.local import LocalExecutor

        return LocalExecutor()
    early = _take_early(root.ray)
    if early is not None:
        try:
            early.add_preload(preload)
        except BaseException:          # a stop while it reached the zygote: taken, so ended here
            early.close()
            raise
        return early
    from sweeper.executors.ray_executor import RayExecutor

    return RayExecutor(root.ray, preload)


def runs_on_ray(config: Any) -> bool:
    """Whether a sweep with this (composed) config will start trials on Ray: not a dry run, not
    the local executor, not a suite (which runs each sweep as a process of its own)."""
    overnight = config.get("overnight") or {}
    return (config.get("executor", "ray") == "ray" and not config.get("dry_run", False)
            and not overnight.get("sweeps"))


@contextlib.contextmanager
def head_start() -> Iterator[None]:
    """The launcher's scope: inside it, the first composed job may start Ray early
    (`begin_early`); on leaving, an executor that no sweep took (a config error found later, an
    interrupt) is closed."""
    global _ARMED, _EARLY
    _ARMED = True
    try:
        yield
    finally:
        _ARMED = False
        early, _EARLY = _EARLY, None
        try:
            if early is not None:
                early.close()
        finally:
            end_spare()      # a spare that no executor adopted (a config error, an interrupt)


def begin_early(config: Any, root: Any = None) -> None:
    """Called with the first job's checked config (`root`: as a RootConfig), before the other
    jobs are composed: starts Ray and the node zygote now when the sweep runs on Ray. A config
    error in that job, or in its workload's plan-time checks on this machine (a local Ray's),
    comes before anything starts; outside head_start (a test composing configs), nothing starts."""
    global _EARLY
    if not _ARMED or _EARLY is not None:
        return
    if not runs_on_ray(config):
        end_spare()          # a dry run, executor=local or a suite that a file set: the command's spare goes unused
        return
    mark("first_job_composed")
    from sweeper.executors.ray_executor import RayExecutor
    from sweeper.preflight import check_node_ip, check_temp_room

    ray_cfg = _ray_config(config.get("ray") or {})
    check_temp_room("ray", ray_cfg.address)            # a Ray started on a full disk times out, 30 s later
    check_node_ip(ray_cfg.node_ip_address)             # one of another machine: Ray retries for minutes
    if root is not None and not ray_cfg.address:       # an attached cluster's shape is known only from it
        from sweeper.plan import check_workload

        check_workload(root, _local_ray_shape(ray_cfg))
    _EARLY = RayExecutor(ray_cfg, preload=())
    _EARLY.begin()


def _local_ray_shape(ray_cfg):
    """The node a local Ray will have: ray.num_cpus / ray.num_gpus, else this machine's."""
    from sweeper.executors.local import this_machine

    here = this_machine()
    cpus = here.node_cpus if ray_cfg.num_cpus is None else [float(ray_cfg.num_cpus)]
    gpus = here.node_gpus if ray_cfg.num_gpus is None else [float(ray_cfg.num_gpus)]
    return dataclasses.replace(here, node_cpus=cpus, node_gpus=gpus)


def _take_early(ray_cfg) -> Optional[Executor]:
    """The executor begun by head_start, when its Ray settings are this sweep's."""
    global _EARLY
    early, _EARLY = _EARLY, None
    if early is not None and early.cfg != ray_cfg:
        early.close()
        return None
    return early


def _ray_config(node: Any):
    from omegaconf import OmegaConf

    from sweeper.schema.run import RayConfig

    values = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    return RayConfig(**values)
