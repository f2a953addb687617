"""A sweep's life: plan -> executor -> records -> analysis -> publishers.

Knows no Hydra and no Ray. Its input is a list of `Job`s, the composed and checked
configs of the grid points (the Hydra launcher plugin is an adapter that builds them);
its output is the run folder and an exit code. Every job is planned and checked before
any trial starts, so bad input costs no trial. Trials go to an executor (Ray, or local
in-process) through the trial loop (sweeper/sweep.py); the run folder and resuming are
sweeper/runfolder.py's; after the last trial, one analysis of the run feeds every view
(sweeper/sweep_end.py).
"""
from __future__ import annotations

import sys
import threading
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path
from typing import List, Optional, Tuple

from sweeper import exitcodes, youngcollector
from sweeper.errors import ConfigError, SweeperError
from sweeper.executors import make_executor
from sweeper.executors.local import this_machine
from sweeper.plan import ClusterShape, Trial, plan_trials, spread_over_fleet
from sweeper.interrupts import deferred, interrupted, stop_signals
from sweeper.preflight import check_machine
from sweeper.runfolder import (check_results_dir, check_same_cells, drop_new_run, new_run, planned_run, resumed_run,
                               writing)
from sweeper.schema import AUTO, RootConfig
from sweeper.spec import preload_of, spec_for
from sweeper.sweep import Job, Sweep
from sweeper.sweep_end import publish_end
from sweeper.tempfolders import clear_abandoned, held_folder, remove
from sweeper.timeline import mark

__all__ = ["Job", "run_sweep", "plan", "check_prices", "print_plan"]

# -- the whole sweep ----------------------------------------------------------------
def check_prices(root: RootConfig, trials: List[Trial]) -> None:
    """Prices against what the trials will hold: CPU-only trials need cost.cpu_hour_usd; GPU
    prices must name this machine's GPU models when trials run here (a local Ray or the local
    executor). Each gap is one line (bad input when the objective is cost). On a remote
    cluster the GPU models are known only from the trials' fingerprints: a note then."""
    cost = root.cost
    if not cost.enabled or (root.ray.address and root.executor == "ray"):   # the plan here is not the cluster's
        return
    cpu_only = sum(1 for t in trials if not t.num_gpus)
    line = None
    if cpu_only and cost.cpu_hour_usd is None:
        line = (f"{cpu_only} trial(s) run on CPUs only and cost.cpu_hour_usd is not set: they will have no cost "
                f"(set cost.cpu_hour_usd=PRICE, USD per CPU-hour)")
    elif cost.gpu_hour_usd and any(t.num_gpus for t in trials):
        from sweeper.analysis.cost import unpriced_line      # here: that module imports pandas
        from sweeper.executors.local import gpu_models

        line = unpriced_line(cost.gpu_hour_usd, gpu_models())
    if line and root.analysis.objective == "cost":
        raise SweeperError(f"{line} (analysis.objective=cost)")
    if line:
        print(f"warning: {line}", file=sys.stderr)


def run_sweep(jobs: List[Job], multirun: Optional[str] = None) -> int:
    """Runs the jobs' grid; returns the exit code (sweeper.exitcodes). `multirun`: the text
    of multirun.yaml, written into the run folder once it exists. Ctrl-C or SIGTERM at any
    phase ends it with one line and exit 130 (sweeper/interrupts.py)."""
    with stop_signals():
        root = jobs[0].config
        try:
            run, local_plan = checked(jobs, root)
        except SweeperError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
        except KeyboardInterrupt:
            return interrupted("while planning: nothing was written")
        if root.dry_run:
            print_plan(local_plan, root, run)
            return exitcodes.OK
        try:
            return launched(jobs, root, multirun, run if root.resume else None)
        except KeyboardInterrupt:       # while the executor ended, or again while stopping (then no line)
            return interrupted("while the sweep ended: finished trials are kept; resume=latest writes what is missing")


def checked(jobs: List[Job], root: RootConfig) -> Tuple[Path, List[Trial]]:
    """Every check before anything starts or is written: the run folder (resumed, or where a
    new one would go), the plan on this machine, the prices."""
    check_results_dir(root)
    run = resumed_run(root) if root.resume else planned_run(root)
    local_plan = plan(jobs, root, this_machine())
    if root.resume:
        check_same_cells(run, local_plan)
    check_prices(root, local_plan)
    check_machine(root, local_plan, this_machine())    # folders it will write, CPUs it asks for
    return run, local_plan


def launched(jobs: List[Job], root: RootConfig, multirun: Optional[str], resumed: Optional[Path]) -> int:
    """Starts the executor, runs the trials, publishes the end. A new run folder is created
    here, and goes again if nothing got into it (interrupted or refused before any trial)."""
    with ExitStack() as held:                 # the run folder, held while this sweep writes it
        if resumed is not None:
            try:
                held.enter_context(writing(resumed))
            except SweeperError as exc:           # taken by another sweep since the check
                print(f"error: {exc}", file=sys.stderr)
                return exc.code
        return _launched(jobs, root, multirun, resumed, held)


def _launched(jobs: List[Job], root: RootConfig, multirun: Optional[str], resumed: Optional[Path],
              held: ExitStack) -> int:
    run, created, sweep, closing, executor, scratch, trials_over = resumed, None, None, None, None, None, False
    try:
        executor = make_executor(root, preload_of([spec_for(j.config.workload) for j in jobs]))
        clear_abandoned()                               # what SIGKILLed sweeps before this one left there
        scratch = held_folder("sweeper-scratch-")       # every trial's scratch folder, on this node
        if resumed is None:
            created = new_run(root, multirun)
            run = created.path
            held.enter_context(writing(run))
        warm_imports(root, jobs)
        mark("imports_warm")
        shape = executor.start()
        mark("executor_started")
        if not executor.runs_trials_here:   # the start's imports are done; in-process, the first trial's follow
            youngcollector.restore()    # Ray's handles are then collected while Ray is up: one freed after its
                                        # shutdown ends the process at once (Ray's "core worker ... shutdown", exit 1)
        trials = plan(jobs, root, shape)
        sweep = Sweep(run, root, jobs, len(trials), scratch=scratch)
        code = sweep.run_trials(executor, trials, shape)
        mark("trials_done")
        if executor.closes_beside_the_end:        # the records are safe: Ray ends while the end is published
            with deferred():                      # a stop now: `closing` is known, and waited on below
                closing = closing_aside(executor, scratch)
        trials_over = True
    except SweeperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return stopped_before_the_end(sweep, run if resumed is not None else None)
    finally:
        if closing is None:
            close(executor, scratch)
        elif not trials_over:
            ended_aside(closing)
        drop_new_run(created)
    try:
        code = max(code, ended(sweep, root, run))
        mark("published")
    finally:
        if closing is not None:
            closing.result()
    return code


def stopped_before_the_end(sweep: Optional[Sweep], resumed: Optional[Path]) -> int:
    """Ctrl-C or SIGTERM from the executor's start to the trials' end: its one line, unless the
    trial loop said one already (a second stop while it cancelled the trials: interrupts.interrupted)."""
    if resumed is None and (sweep is None or not sweep.records):    # the new run folder goes
        return interrupted("before any trial started: nothing was kept")
    where = sweep.run if sweep is not None else resumed
    return interrupted(f"before the sweep ended: finished trials are kept in {where}; add resume=latest to the same "
                       f"command to run the rest and write what is missing")


def ended_aside(closing: Future) -> None:
    """Waits for the executor's end begun beside the table, on a way out that a stop took: what
    broke there is a warning after the stop's line, not a bug's traceback in its place."""
    try:
        closing.result()
    except Exception as exc:                  # noqa: BLE001 - said, not raised: the stop is the outcome
        print(f"warning: ending the executor failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def close(executor, scratch: Optional[Path]) -> None:
    try:
        if executor is not None:
            executor.close()
            mark("executor_closed")
    finally:
        if scratch is not None:
            remove(scratch)      # even where the end broke: else it stays until the next sweep clears it


def closing_aside(executor, scratch: Path) -> Future:
    """`close`, in a thread of its own: a local Ray's end (0.1-0.4 s) beside the analysis and the
    table, which need nothing of it; only for an executor that says it may
    (`closes_beside_the_end`). The future's `result()` waits for it and raises what it raised."""
    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(close(executor, scratch))
        except BaseException as exc:              # noqa: BLE001 - the caller's to raise
            done.set_exception(exc)

    threading.Thread(target=run, name="sweeper-close", daemon=True).start()
    return done


def warm_imports(root: RootConfig, jobs: List[Job]) -> None:
    """What the trial loop and the end of the sweep import (pandas, pyarrow, the analysis), imported
    while Ray starts in the background: off the way from the first trial to the table. With Ray,
    scipy.stats too (seconds) where the end may compare anything (`may_compare`), and Ray's start
    hides it; in-process trials (executor=local) import it only if the analysis does."""
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import sweeper.analysis.run  # noqa: F401
    import sweeper.publishers  # noqa: F401

    if root.executor == "ray" and may_compare(root, jobs):
        import scipy.stats  # noqa: F401


def may_compare(root: RootConfig, jobs: List[Job]) -> bool:
    """Whether the end of the sweep may test one set of values against another (scipy.stats):
    cells against each other, repeats, a resumed run's earlier trials, or the history's nights.
    A run of one trial's intervals are over its steps (numpy alone)."""
    return len(jobs) > 1 or root.repeats != 1 or bool(root.resume) or root.history.enabled


def ended(sweep: Sweep, root: RootConfig, run: Path) -> int:
    try:
        return publish_end(sweep, root, run)
    except KeyboardInterrupt:
        return interrupted(f"while publishing: the trials are kept in {run}; resume=latest writes what is "
                           f"missing (summary, cells, report, history)")


def plan(jobs: List[Job], root: RootConfig, shape: ClusterShape) -> List[Trial]:
    """The trials to start with: `repeats` of each cell (repeats=auto: the first round, computed
    from the number of comparisons; more rounds come for the cells still open), each once per
    device of the fleet with resources.every_device."""
    analysis = jobs[0].values.get("analysis") or {}
    args = ([(j.overrides, j.config) for j in jobs], shape)
    rest = (analysis.get("baseline"), root.order, root.order_seed, list(analysis.get("compare_within") or []))
    repeats = root.repeats
    if root.repeats == AUTO:
        repeats = first_round(root, plan_trials(*args, 1, *rest))
    trials = plan_trials(*args, repeats, *rest)
    if not root.resources.every_device:
        return trials
    if root.repeats == AUTO:
        raise ConfigError("repeats=auto: each device of resources.every_device would need decisions of its own; "
                          "give a number of repeats (repeats=5)")
    if root.executor != "ray":
        raise ConfigError("resources.every_device: trials are pinned to GPUs and nodes by Ray; "
                          "use executor=ray (the default)")
    return spread_over_fleet(trials, shape)


def auto_plan_line(root: RootConfig, trials: List[Trial]) -> str:
    """What repeats=auto will do beyond the trials listed: its first round, then the rounds possible."""
    from sweeper.rounds import Rounds

    rounds = Rounds(root, trials)
    return (f"repeats=auto: these are the first round ({rounds.design.first} repeat(s) a cell, the baseline twice "
            f"as many); cells still undecided get more rounds, up to {rounds.design.max_repeats} repeats: at most "
            f"{len(trials) + rounds.most_after_first()} trial(s) in all")


def first_round(root: RootConfig, cells: List[Trial]) -> int:
    """repeats=auto: the first round's repeats per cell, for this plan's number of comparisons."""
    from sweeper.rounds import Rounds

    return Rounds(root, cells).design.first


def print_plan(trials: List[Trial], root: RootConfig, run: Path) -> None:
    print(f"dry run: {len(trials)} trial(s) of sweep '{root.sweep.name}', nothing launched; results would go to {run}")
    if root.repeats == AUTO:
        print(auto_plan_line(root, trials))
    for t in trials:
        note = f"  INFEASIBLE: {t.infeasible}" if t.infeasible else ""
        base = "  (baseline)" if t.is_baseline else ""
        print(f"  {t.trial_id:<15} cpus={t.num_cpus:g} gpus={t.num_gpus:g}  {' '.join(t.measured_overrides())}{base}{note}")

