"""The only code that talks to Ray: compose, check, plan, submit, stream back, write.

Every job's config is composed and checked before any trial starts, so bad
input costs no trial. Trials are Ray tasks with CPU and GPU requests; Ray's
scheduler places them. Results stream back with `ray.wait` as each trial ends,
and each is written to disk at once, so an interrupted sweep keeps what finished.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from sweeper import display, exitcodes, sinks
from hydra_plugins.sweeper_ray_launcher._compose import JobComposer
from hydra_plugins.sweeper_ray_launcher._runner import Runner, Sweep
from sweeper.errors import SweeperError
from sweeper.plan import ClusterShape, Trial, plan_trials, swept_keys
from sweeper.results import read_records, run_dir, summary_row
from sweeper.schema import RootConfig, root_config_from_dict


Job = Tuple[List[str], RootConfig, Dict[str, Any]]   # overrides, checked config, resolved dict


# -- composing and checking ---------------------------------------------------------
def compose_job(composer, overrides: Sequence[str], index: int) -> Job:
    sweep_config = composer.compose(overrides, index)
    HydraConfig.instance().set_config(sweep_config)
    values = app_values(sweep_config)
    return list(overrides), root_config_from_dict(values), values


def app_values(sweep_config: DictConfig) -> Dict[str, Any]:
    """The app's config, resolved, without Hydra's own node (what Hydra's run_job hands the
    task), read key by key rather than from a second deep copy of the whole config."""
    return {key: OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
            for key, node in ((k, sweep_config[k]) for k in sweep_config if k != "hydra")}


def check_shard_patterns(jobs: Sequence[Job]) -> None:
    """Local shards that are missing, unreadable or not tar files fail here, not inside a worker."""
    from workloads.shards import check_local_shards

    for url in sorted({job[1].data.url for job in jobs if job[1].data.url}):
        if "://" not in url and not url.startswith("pipe:"):
            problem = check_local_shards(url)
            if problem:
                raise SweeperError(f"data.url={url!r}: {problem}")


def compose_all(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[Job]:
    composer = JobComposer(launcher.hydra_context.config_loader, launcher.config)
    jobs = [compose_job(composer, o, initial_job_idx + i) for i, o in enumerate(job_overrides)]
    check_shard_patterns(jobs)
    return jobs


# -- Ray ----------------------------------------------------------------------------
def connect(ray_cfg) -> bool:
    """Starts a local Ray (returns True) or attaches to `ray.address`."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: Dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                              "log_to_driver": False}
    if ray_cfg.runtime_env:
        kwargs["runtime_env"] = dict(ray_cfg.runtime_env)
    if ray_cfg.node_ip_address:
        kwargs["_node_ip_address"] = ray_cfg.node_ip_address
    if ray_cfg.address:
        ray.init(address=ray_cfg.address, **kwargs)
        return False
    ray.init(num_cpus=ray_cfg.num_cpus, num_gpus=ray_cfg.num_gpus, **kwargs)
    return True


def cluster_shape() -> ClusterShape:
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return ClusterShape(node_cpus=[n["Resources"].get("CPU", 0.0) for n in nodes],
                        node_gpus=[n["Resources"].get("GPU", 0.0) for n in nodes])


def local_shape() -> ClusterShape:
    """This machine alone, for a dry run that starts nothing."""
    gpus = len([d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()]) \
        if os.path.isdir("/dev") else 0
    return ClusterShape(node_cpus=[float(os.cpu_count() or 1)], node_gpus=[float(gpus)])


class NodeZygote:
    """A zygote the driver starts on its own machine while Ray starts, so that its torch
    import overlaps Ray's start instead of following it. The local Ray's workers fork
    their trials from it; workers on other machines (no such socket there) use their own."""

    def __init__(self) -> None:
        from sweeper.isolation import start_zygote

        self.folder = tempfile.mkdtemp(prefix="sweeper-node-")
        self.socket_path = os.path.join(self.folder, "zygote.sock")
        self.log = open(os.path.join(self.folder, "zygote.log"), "wb")
        self.proc = start_zygote(self.socket_path, stderr=self.log)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _run_on_worker(spec: Dict[str, Any], timeout_s: float, node_zygote: Optional[str]):
    """Runs inside a Ray worker: fork the trial from the node's zygote, or this worker's own."""
    from sweeper.isolation import shared_host

    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "") if spec["num_gpus"] > 0 else ""
    outcome = shared_host(node_zygote).run(spec, timeout_s, {"CUDA_VISIBLE_DEVICES": gpus})
    outcome.record["worker_pid"] = os.getpid()
    return outcome


_REMOTE = None


def submit(trial: Trial, spec: Dict[str, Any], node_zygote: Optional[str] = None):
    global _REMOTE
    import ray

    if _REMOTE is None:
        # max_calls=0 keeps the worker and its warm zygote even for GPU tasks: CUDA lives
        # only in each trial's own child process, so nothing of one trial stays behind.
        _REMOTE = ray.remote(max_calls=0)(_run_on_worker)
    remote = _REMOTE.options(num_cpus=trial.num_cpus, num_gpus=trial.num_gpus, max_retries=0,
                             name=f"trial-{trial.trial_id}")
    return remote.remote(spec, trial.config.resources.timeout_s, node_zygote)


# -- the sweep ----------------------------------------------------------------------
def plan(jobs: List[Job], root: RootConfig, shape: ClusterShape) -> List[Trial]:
    try:
        baseline = (jobs[0][2].get("analysis") or {}).get("baseline")
        return plan_trials([(j[0], j[1]) for j in jobs], shape, root.repeats, baseline, root.order,
                           root.order_seed)
    except SweeperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exitcodes.USAGE)


def print_plan(trials: List[Trial], root: RootConfig, run: Path) -> None:
    print(f"dry run: {len(trials)} trial(s) of sweep '{root.sweep.name}', nothing launched; results would go to {run}")
    for t in trials:
        note = f"  INFEASIBLE: {t.infeasible}" if t.infeasible else ""
        base = "  (baseline)" if t.is_baseline else ""
        print(f"  {t.trial_id:<15} cpus={t.num_cpus:g} gpus={t.num_gpus:g}  {' '.join(t.overrides)}{base}{note}")


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
    try:
        jobs = compose_all(launcher, job_overrides, initial_job_idx)
        root = jobs[0][1]
        run = resolve_run(root, Path(str(launcher.config.hydra.sweep.dir)))
    except SweeperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exitcodes.USAGE)
    axes = swept_keys([j[0] for j in jobs])
    if jobs[0][2].get("dry_run"):
        print_plan(plan(jobs, root, local_shape()), root, run)
        return _job_returns(jobs, [None] * len(jobs))
    started_ray, zygote = False, None
    try:
        if not root.ray.address and not root.ray.runtime_env:
            zygote = NodeZygote()       # imports torch while Ray starts
        started_ray = connect(root.ray)
        shape = cluster_shape()
        trials = plan(jobs, root, shape)
        sweep = run_sweep(trials, jobs, root, run, shape, kill_tasks=not started_ray,
                          node_zygote=zygote.socket_path if zygote and started_ray else None)
    except KeyboardInterrupt:      # before any trial started: nothing to keep
        print("interrupted before any trial started", file=sys.stderr)
        sys.exit(exitcodes.INTERRUPTED)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
        if zygote is not None:
            zygote.close()
    report_end(sweep, trials, axes, root, run, jobs)
    return _job_returns(jobs, [sweep.records.get(f"{c}-0") for c in _cell_ids(trials, len(jobs))])


def resolve_run(root: RootConfig, fresh: Path) -> Path:
    """The run folder: a new one, or with `resume=` an earlier one (Hydra's fresh, empty one goes)."""
    if not root.resume:
        return run_dir(root.results_dir, root.sweep.name, root.run_id)
    runs = Path(root.results_dir).expanduser() / root.sweep.name
    if root.resume == "latest":
        earlier = sorted(p for p in runs.iterdir() if (p / "trials").is_dir()) if runs.is_dir() else []
        if not earlier:
            raise SweeperError(f"resume=latest: no earlier run of sweep '{root.sweep.name}' under {runs}")
        run = earlier[-1]
    else:
        run = runs / root.resume
        if not (run / "trials").is_dir():
            raise SweeperError(f"resume={root.resume}: no run folder with trials at {run}")
    if fresh.resolve() != run.resolve() and fresh.is_dir() and set(os.listdir(fresh)) <= {"multirun.yaml"}:
        shutil.rmtree(fresh)
    root.run_id = run.name
    return run


def earlier_results(run: Path, trials: List[Trial]) -> Dict[str, Dict[str, Any]]:
    """Finished trials of this grid from an earlier attempt at the run; leftovers of
    half-written folders are removed so those trials run again."""
    for leftover in (run / "trials").glob(".*"):
        shutil.rmtree(leftover, ignore_errors=True)
    wanted = {t.trial_id for t in trials}
    return {r["trial_id"]: r for r in read_records(run) if r["trial_id"] in wanted and r["status"] == "ok"}


def run_sweep(trials: List[Trial], jobs: List[Job], root: RootConfig, run: Path, shape: ClusterShape,
              kill_tasks: bool, node_zygote: Optional[str] = None) -> Sweep:
    done = earlier_results(run, trials) if root.resume else {}
    sweep = Sweep(run, len(trials), jobs[0][2], done)
    print(f"sweep '{root.sweep.name}': {len(trials)} trial(s) on {_describe(shape, root)}, "
          f"isolation={root.resources.isolation}", flush=True)
    if done:
        print(f"resuming {run}: {len(done)} trial(s) already finished, {len(trials) - len(done)} to run", flush=True)
    stop = threading.Event()
    runner = Runner(sweep, lambda trial, spec: submit(trial, spec, node_zygote),
                    lambda t: t.spec(root.sweep.name, root.run_id, os.getpid()), stop.is_set)
    previous = {sig: signal.signal(sig, _interrupt_handler(stop)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for trial in trials:
            if trial.trial_id not in done:
                runner.start(trial, jobs[trial.index][2])
        runner.run()
    except KeyboardInterrupt:
        print("interrupted: cancelling running trials; finished ones are kept", file=sys.stderr, flush=True)
        runner.cancel_all(kill_tasks)
        exitcodes.report(exitcodes.INTERRUPTED)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sweep.close()
    return sweep


def _interrupt_handler(stop: threading.Event):
    """Ctrl-C and SIGTERM raise KeyboardInterrupt, and leave a flag the runner checks
    between waits, so an interrupt raised inside a library that swallows it still stops the sweep."""
    def handler(signum, frame):
        stop.set()
        raise KeyboardInterrupt
    return handler


def report_end(sweep: Sweep, trials: List[Trial], axes: List[str], root: RootConfig, run: Path,
               jobs: List[Job]) -> None:
    rows = [summary_row(r) for r in sweep.records.values()]
    print()
    print(display.results_table(rows, axes))
    print(display.footer(rows, root.resources.isolation, str(run)))
    if any(r["status"] != "ok" for r in rows):
        exitcodes.report(exitcodes.TRIALS_FAILED)
    sinks.on_sweep_end(run, list(sweep.records.values()), jobs[0][2])


def _cell_ids(trials: List[Trial], count: int) -> List[str]:
    ids = [""] * count
    for t in trials:
        ids[t.index] = t.cell_id
    return ids


def _describe(shape: ClusterShape, root: RootConfig) -> str:
    where = f"Ray at {root.ray.address}" if root.ray.address else "a local Ray"
    return (f"{where} ({len(shape.node_cpus)} node(s), {sum(shape.node_cpus):g} CPUs, "
            f"{sum(shape.node_gpus):g} GPUs)")


def _job_returns(jobs: List[Job], records: List[Any]) -> List[JobReturn]:
    return [JobReturn(overrides=j[0], status=JobStatus.COMPLETED, _return_value=r, task_name="sweeper")
            for j, r in zip(jobs, records)]
