"""Executors: where and how trials run. The driver talks to one through `Executor` (base.py).

- `ray` (default, sweeper/executors/ray_executor.py, the only module that imports Ray):
  each trial a Ray task, forked from a warm zygote into a contained process of its own.
- `local` (sweeper/executors/local.py): trials one at a time inside the driver's own
  process, so a debugger's breakpoint or a profiler sees the workload.

To add one: subclass `Executor`, give it a name in `make_executor`, add the name to
`schema.EXECUTORS`. Both shipped executors feed the same driver, so the summary, tables,
exit codes and publishers are the same whichever ran the trials.

A head start: the launcher calls `head_start(config)` as soon as Hydra has the sweep's config,
so that Ray and the node zygote start while the jobs are composed, checked and planned;
`make_executor` then hands that executor over instead of starting another.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence

from sweeper.executors.base import Executor, TrialLost

__all__ = ["Executor", "TrialLost", "make_executor", "head_start", "runs_on_ray"]

_EARLY: Optional[Executor] = None      # begun by head_start, not yet taken by make_executor


def make_executor(root, preload: Sequence[str]) -> Executor:
    if root.executor == "local":
        from sweeper.executors.local import LocalExecutor

        return LocalExecutor()
    early = _take_early(root.ray)
    if early is not None:
        early.add_preload(preload)
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
def head_start(config: Any) -> Iterator[None]:
    """Begins the Ray executor now when `config` (Hydra's, before the jobs are composed) runs on
    Ray; on leaving, ends it if no sweep took it (a config error, a dry run in a job)."""
    global _EARLY
    if runs_on_ray(config):
        from sweeper.executors.ray_executor import RayExecutor

        _EARLY = RayExecutor(_ray_config(config.get("ray") or {}), preload=())
        _EARLY.begin()
    try:
        yield
    finally:
        early, _EARLY = _EARLY, None
        if early is not None:
            early.close()


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
