"""The trial loop: submit through an executor, stream records back, retries, OOM shrinking,
the window, the deadline, the rounds of repeats=auto, interrupts and the loss of the local Ray node.

Each trial's record is redacted once as it ends, written at once (so an interrupted sweep
keeps what finished), shown, and handed to the trial publishers.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from sweeper import display, exitcodes
from sweeper.executors.base import Executor, NodeLost, TrialLost
from sweeper.faults import node_lost_line
from sweeper.interrupts import deferred, interrupted, stop_signals
from sweeper.plan import ClusterShape, Trial, shrunk
from sweeper.progress import Progress
from sweeper.record import TrialRecord
from sweeper.files import write_bytes_atomic
from sweeper.results import write_summary, write_trial
from sweeper.runfolder import earlier_results
from sweeper.schema import AUTO, RootConfig
from sweeper.timeline import mark

# Trial processes that died without a record of their own may have been killed from outside.
RETRYABLE_ERRORS = {"TrialKilled", "TrialCrashed"}
WAIT_S = 1.0          # how often the loop looks at the stop flag while trials run


@dataclass
class Job:
    overrides: List[str]
    config: RootConfig          # checked
    values: Dict[str, Any]      # resolved, as each trial's config.yaml stores it


@dataclass
class Attempt:
    trial: Trial
    spec: Dict[str, Any]
    values: Dict[str, Any]
    number: int = 1



def in_groups(trials: List[Trial]) -> List[List[Trial]]:
    """Trials that start together: a fleet group (one per device), else each alone."""
    groups: List[List[Trial]] = []
    for t in trials:
        if t.group and groups and groups[-1][0].group == t.group:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def window_size(root: RootConfig, trials: List[Trial], shape: ClusterShape) -> Optional[int]:
    """How many trials may wait at the executor at once. All of them (None) unless what runs
    is decided as the sweep goes: a deadline, repeats=auto, or the fleet (one group at a
    time, so that each device of the group gets exactly one trial)."""
    if root.resources.every_device:
        return 1
    if not (root.repeats == AUTO or root.overnight.deadline) or not trials:
        return None
    first = trials[0]
    slots = sum(int(c // max(first.num_cpus, 1e-9)) for c in shape.node_cpus)
    if first.num_gpus > 0:
        slots = min(slots, sum(int(g // first.num_gpus) for g in shape.node_gpus))
    return max(1, slots)


# -- trials as they end ---------------------------------------------------------------
class Sweep:
    """Runs the trials through an executor and keeps their records.

    Each trial's folder is written the moment it ends: that is the durable record.
    summary.parquet/csv, a view over all of them, is rewritten at most every
    SUMMARY_EVERY_S and at the end, so a sweep of thousands of short trials does not
    spend its driver rewriting it (O(N^2) otherwise)."""

    SUMMARY_EVERY_S = 2.0

    def __init__(self, run: Path, root: RootConfig, jobs: List[Job], total: int, scratch: Optional[Path] = None):
        self.run, self.root, self.jobs = run, root, jobs
        self.scratch = scratch                      # the driver's folder for the trials' scratch folders
        self.records: Dict[str, TrialRecord] = {}
        self.pending: Dict[Any, Attempt] = {}
        self.total = total
        self.progress: Optional[Progress] = None    # drawn once the sweep's first line is out
        self.summary_at: Optional[float] = None
        self.summary_stale = False
        self.stop = threading.Event()
        self.trackers_of = lambda record: dict(record.trackers)
        self.queue: deque = deque()                 # groups of trials not yet submitted
        self.window: Optional[int] = None           # None: everything submitted at once
        self.shape: Optional[ClusterShape] = None
        self.skipped: List[Dict[str, Any]] = []     # trials the deadline kept from starting
        self.rounds: Any = None                     # repeats=auto: sweeper.rounds.Rounds

    def run_trials(self, executor: Executor, trials: List[Trial], shape: ClusterShape) -> int:
        from sweeper import publishers

        self.executor, self.on_trial = executor, publishers.on_trial
        executor.before_trial = publishers.drain    # in-process trials: what starts during one is the trial's
        self.trackers_of = lambda record: publishers.trackers(self.run, record, self.jobs[0].values)
        done = earlier_results(self.run, trials, any_repeat=self.root.repeats == AUTO) if self.root.resume else {}
        self.records.update(done)
        self.summary_stale = bool(self.root.resume)  # a resumed run's summary may never have been written
        print(f"sweep '{self.root.sweep.name}': {len(trials)} trial(s) on {executor.describe(shape)}, "
              f"isolation={self.root.resources.isolation}", flush=True)
        if done:
            print(f"resuming {self.run}: {len(done)} trial(s) already finished, "
                  f"{sum(t.trial_id not in done for t in trials)} to run", flush=True)
        self.progress = Progress(self.total)
        self.progress.advance(len(done))
        self.shape, self.window = shape, window_size(self.root, trials, shape)
        if self.root.repeats == AUTO:
            from sweeper.rounds import Rounds

            self.rounds = Rounds(self.root, trials)
            self.progress.expect(self.total + self.rounds.most_after_first())   # the ETA of every round possible
        self.queue.extend(in_groups([t for t in trials if t.trial_id not in done]))
        try:
            with stop_signals(self._interrupt):
                self.fill()
                self.maybe_next_round()     # a resumed run whose first round had all ended
                self.fill()
                self.loop()
            return exitcodes.OK
        except KeyboardInterrupt:
            code = interrupted("while trials ran: running trials are cancelled, finished ones kept; "
                               "resume=latest runs the rest")
            self.cancel_all()
            return code
        except NodeLost as lost:
            return self.stop_for_lost_node(lost)
        finally:
            if self.progress is not None:
                self.progress.close()
            if self.summary_stale:
                self.write_summary()
            if self.root.overnight.deadline is not None or self.skipped or (self.run / "skipped.json").exists():
                self.write_skipped()             # a resumed run's list says what is still not started

    def _interrupt(self, signum, frame):
        """Ctrl-C and SIGTERM raise KeyboardInterrupt and leave a flag the loop checks between
        waits, so an interrupt swallowed inside a library still stops the sweep."""
        self.stop.set()
        raise KeyboardInterrupt

    def start(self, trial: Trial, values: Dict[str, Any], number: int = 1, retry_of: Optional[str] = None) -> None:
        spec = {**trial.spec(self.root.sweep.name, self.root.run_id, os.getpid()), "retry_of": retry_of,
                "scratch_root": str(self.scratch) if self.scratch else None,
                "more_to_come": bool(self.queue)}     # a prestarted trial's standby is for the next
        attempt = Attempt(trial, spec, values, number)
        if trial.infeasible:
            self.finish(TrialRecord.for_spec(spec, status="infeasible", error_type="Infeasible",
                                             error_message=trial.infeasible, pid=None), attempt, {})
            return
        self.pending[self.executor.submit(trial, spec)] = attempt

    def loop(self) -> None:
        while self.pending:
            done = self.executor.wait(list(self.pending), WAIT_S)
            if self.stop.is_set():
                raise KeyboardInterrupt
            lost = self.executor.node_lost()
            if lost is not None:                 # before a lost trial is retried on a node that is gone
                raise lost
            for handle in done:
                self.handle(handle, self.pending.pop(handle))
            self.fill()

    # -- what starts next: the window, the deadline, adaptive repeats ------------------
    def fill(self) -> None:
        """Submits queued groups while the window has room; past the deadline, none."""
        while self.queue:
            if self.past_deadline():
                self.skip_rest()
                return
            group = self.queue[0]
            if self.window is not None and self.pending and len(self.pending) + len(group) > self.window:
                return
            self.queue.popleft()
            for trial in group:
                self.start(trial, self.jobs[trial.index].values)

    def past_deadline(self) -> bool:
        deadline = self.root.overnight.deadline
        return deadline is not None and time.time() >= deadline

    def skip_rest(self) -> None:
        """The night is over: what is queued does not start, and says so."""
        left = [t for group in self.queue for t in group]
        self.queue.clear()
        self.skip(left, "deadline")
        print(f"budget: the deadline passed; {len(left)} trial(s) not started "
              f"(listed in {self.run / 'skipped.json'}): {' '.join(t.trial_id for t in left[:8])}"
              f"{' ...' if len(left) > 8 else ''}", file=sys.stderr, flush=True)

    def skip(self, trials: List[Trial], reason: str) -> None:
        """Trials that do not start, for skipped.json (the night's manifest lists them too)."""
        self.skipped += [{"trial_id": t.trial_id, "cell_id": t.cell_id, "repeat": t.repeat,
                          "overrides": list(t.overrides), "reason": reason} for t in trials]

    def write_skipped(self) -> None:
        self.run.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(self.run / "skipped.json", json.dumps(self.skipped, indent=1).encode())

    def maybe_next_round(self) -> None:
        """repeats=auto: once a round has ended, the next one for the cells still open
        (sweeper/rounds.py); the progress bar's total becomes what may still run."""
        if self.rounds is None or self.pending or self.queue or self.stop.is_set() or self.past_deadline():
            return
        more, left = self.rounds.next_round([r.to_dict() for r in self.records.values()])
        line = self.rounds.line()
        if line:
            self.say(line + (f"; next round: {len(more)} trial(s)" if more else ""))
        self.queue.extend(in_groups(more))
        if self.progress is not None:
            self.progress.expect(self.progress.done + len(more) + left)

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.write(line)
        else:
            print(line, flush=True)

    def handle(self, handle: Any, attempt: Attempt) -> None:
        try:
            outcome = self.executor.outcome(handle)
            mark("outcome")
            record, files = outcome.record, outcome.files
        except TrialLost as lost:    # the worker or its node died: still a row
            record, files = TrialRecord.for_spec(attempt.spec, status="failed", error_type=lost.error_type,
                                                 error_message=lost.message, pid=None), {}
        if self.should_retry(record, attempt):
            self.start(attempt.trial, attempt.values, attempt.number + 1, attempt.spec.get("retry_of"))
            return
        self.finish(record, attempt, files)
        if self.rounds is not None:
            self.rounds.keep_steps(record.trial_id, files)
        self.maybe_shrink(record, attempt)
        self.maybe_next_round()

    def should_retry(self, record: TrialRecord, attempt: Attempt) -> bool:
        lost = record.status == "failed" and (record.error_type in RETRYABLE_ERRORS or record.pid is None)
        return lost and attempt.number <= attempt.trial.config.resources.max_retries

    def maybe_shrink(self, record: TrialRecord, attempt: Attempt) -> None:
        """An out-of-memory trial runs again as its workload's spec shrinks it (resources.on_oom=halve)."""
        if record.status != "oom" or attempt.trial.config.resources.on_oom != "halve":
            return
        smaller = shrunk(attempt.trial)
        if smaller is not None:
            self.progress.grow()
            self.start(smaller, attempt.values, retry_of=record.trial_id)

    def finish(self, record: TrialRecord, attempt: Attempt, files: Dict[str, bytes]) -> None:
        record = record.redacted()     # once, here: the folder, summary, progress and publishers read this copy
        record.attempts = attempt.number
        record.retry_of = attempt.spec.get("retry_of") or record.retry_of
        record.trackers = self.trackers_of(record)
        with deferred():     # a Ctrl-C now would lose a trial that finished: it waits for the folder
            write_trial(self.run, record, attempt.values, files)
            self.records[record.trial_id] = record
        self.summary_stale = True
        if self.summary_at is None or time.monotonic() - self.summary_at >= self.SUMMARY_EVERY_S:
            self.write_summary()
        as_dict = record.to_dict()
        self.on_trial(self.run, as_dict, self.jobs[0].values)
        if self.progress is not None:
            self.progress.trial_done(lambda done, total, wall: display.progress_line(done, total, as_dict, wall))

    def write_summary(self) -> None:
        write_summary(self.run, self.records.values())
        self.summary_at, self.summary_stale = time.monotonic(), False

    def stop_for_lost_node(self, lost: NodeLost) -> int:
        """The local Ray node died: what came back is kept as it is, each trial the node was running
        is a row that says so, and those that never started are listed in skipped.json, as the
        deadline's are (resume=latest runs both). Nothing more is submitted."""
        cut = 0
        for handle in self.executor.wait(list(self.pending), 0, all_ready=True):
            cut += self.keep_or_lost(handle, self.pending.pop(handle), lost)
        running = [a for a in self.pending.values() if a.trial.trial_id in lost.running]
        for attempt in running:
            self.finish(node_died(attempt.spec, lost), attempt, {})
        left = [a.trial for a in self.pending.values() if a.trial.trial_id not in lost.running]
        left += [t for group in self.queue for t in group]
        self.skip(left, "node lost")
        self.pending.clear()
        self.queue.clear()
        cut += len(running)
        print(node_lost_line(lost.what, lost.logs, len(self.records) - cut, cut, len(left)),
              file=sys.stderr, flush=True)
        return exitcodes.NODE_LOST

    def keep_or_lost(self, handle: Any, attempt: Attempt, lost: NodeLost) -> int:
        """A trial that ended as the node died: its record if it came back (0), else a row saying
        the node died (1). Not retried: there is no node to run it on."""
        try:
            outcome = self.executor.outcome(handle)
        except TrialLost:
            self.finish(node_died(attempt.spec, lost), attempt, {})
            return 1
        self.finish(outcome.record, attempt, outcome.files)
        return 0

    def cancel_all(self) -> None:
        """Keeps what finished meanwhile and records the rest as cancelled."""
        for handle in self.executor.wait(list(self.pending), 0, all_ready=True) if self.pending else []:
            self.handle_quietly(handle, self.pending.pop(handle))
        self.executor.cancel(list(self.pending))
        queued = [Attempt(t, {**t.spec(self.root.sweep.name, self.root.run_id, os.getpid()), "retry_of": None},
                          self.jobs[t.index].values) for group in self.queue for t in group]
        self.queue.clear()                  # not yet submitted (a window was in use): cancelled rows too
        for attempt in [*self.pending.values(), *queued]:
            self.finish(TrialRecord.for_spec(attempt.spec, status="cancelled", error_type="Interrupted",
                                             error_message="the sweep was interrupted"), attempt, {})
        self.pending.clear()

    def handle_quietly(self, handle: Any, attempt: Attempt) -> None:
        try:
            outcome = self.executor.outcome(handle)
            mark("outcome")
            self.finish(outcome.record, attempt, outcome.files)
        except Exception as exc:   # cancelled or lost on the way: record it so
            self.finish(TrialRecord.for_spec(attempt.spec, status="cancelled", error_type=type(exc).__name__,
                                             error_message="the sweep was interrupted"), attempt, {})


def node_died(spec: Dict[str, Any], lost: NodeLost) -> TrialRecord:
    return TrialRecord.for_spec(spec, status="failed", error_type="NodeDied", pid=None,
                                error_message=f"the local Ray node stopped while this trial ran ({lost.what}); "
                                              f"resume=latest runs it again")
