"""Submits trials to Ray and streams them back: retries, out-of-memory halving, cancellation.

A trial's end is always a row: finished, failed, out of memory, timed out, infeasible
or cancelled. Ray system failures (a killed worker, a lost node) are retried up to
`resources.max_retries`, then recorded as failed; a workload's own error is not retried.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from sweeper import display, sinks
from sweeper.plan import Trial, halved
from sweeper.redact import redact
from sweeper.results import write_summary, write_trial
from sweeper.trial import base_record

# Trial processes that died without a record of their own may have been killed from outside.
RETRYABLE_ERRORS = {"TrialKilled", "TrialCrashed"}


@dataclass
class Attempt:
    trial: Trial
    spec: Dict[str, Any]
    config: Dict[str, Any]     # the resolved config written as config.yaml
    number: int = 1


def unfinished_record(spec: Dict[str, Any], status: str, error_type: str, message: str) -> Dict[str, Any]:
    record = base_record(spec)
    record.update(status=status, error_type=error_type, error_message=message, pid=None)
    return record


class Sweep:
    """Collects finished trials, writes each at once, prints progress.

    Each trial's folder is written the moment it ends: that is the durable record.
    summary.parquet/csv, a view over all of them, is rewritten at most every
    SUMMARY_EVERY_S and at the end (`close`), so a sweep of thousands of short
    trials does not spend its driver rewriting it (O(N^2) otherwise)."""

    SUMMARY_EVERY_S = 2.0

    def __init__(self, run: Path, total: int, root: Dict[str, Any], done: Optional[Dict[str, dict]] = None):
        self.run, self.total, self.root = run, total, root
        self.records: Dict[str, Dict[str, Any]] = dict(done or {})
        self.started = time.monotonic()
        self.summary_at: Optional[float] = None      # when summary.parquet was last written
        self.summary_stale = False

    def finish(self, record: Dict[str, Any], config: Dict[str, Any], files: Dict[str, bytes]) -> None:
        record = redact(record)     # the summary, the progress line and the sinks read this copy too
        write_trial(self.run, record, config, files)
        self.records[record["trial_id"]] = record
        self.summary_stale = True
        if self.summary_at is None or time.monotonic() - self.summary_at >= self.SUMMARY_EVERY_S:
            self.write_summary()
        sinks.on_trial(self.run, record, self.root)
        print(display.progress_line(len(self.records), self.total, record, time.monotonic() - self.started),
              flush=True)


    def write_summary(self) -> None:
        write_summary(self.run, self.records.values())
        self.summary_at, self.summary_stale = time.monotonic(), False

    def close(self) -> None:
        if self.summary_stale:
            self.write_summary()


class Runner:
    WAIT_S = 1.0     # how often the loop looks at the stop flag while trials run

    def __init__(self, sweep: Sweep, submit, make_spec, stop_requested=lambda: False):
        self.sweep, self.submit_fn, self.make_spec = sweep, submit, make_spec
        self.stop_requested = stop_requested
        self.pending: Dict[Any, Attempt] = {}

    def start(self, trial: Trial, config: Dict[str, Any], number: int = 1, retry_of: Optional[str] = None) -> None:
        spec = {**self.make_spec(trial), "retry_of": retry_of}
        attempt = Attempt(trial, spec, config, number)
        if trial.infeasible:
            self.sweep.finish(unfinished_record(spec, "infeasible", "Infeasible", trial.infeasible), config, {})
            return
        self.pending[self.submit_fn(trial, spec)] = attempt

    def run(self) -> None:
        import ray

        while self.pending:
            done, _ = ray.wait(list(self.pending), num_returns=1, timeout=self.WAIT_S)
            if self.stop_requested():
                raise KeyboardInterrupt
            if done:
                self.handle(done[0], self.pending.pop(done[0]))

    def handle(self, ref, attempt: Attempt) -> None:
        import ray

        try:
            outcome = ray.get(ref)
            record, files = outcome.record, outcome.files
        except ray.exceptions.RayError as exc:   # the worker or its node died: still a row
            record, files = unfinished_record(attempt.spec, "failed", type(exc).__name__, str(exc)[-2000:]), {}
        if self.should_retry(record, attempt):
            self.start(attempt.trial, attempt.config, attempt.number + 1, attempt.spec.get("retry_of"))
            return
        record["attempts"] = attempt.number
        if attempt.spec.get("retry_of"):
            record["retry_of"] = attempt.spec["retry_of"]
        self.sweep.finish(record, attempt.config, files)
        self.maybe_halve(record, attempt)

    def should_retry(self, record: Dict[str, Any], attempt: Attempt) -> bool:
        lost = record["status"] == "failed" and (record.get("error_type") in RETRYABLE_ERRORS or record.get("pid") is None)
        return lost and attempt.number <= attempt.trial.config.resources.max_retries

    def maybe_halve(self, record: Dict[str, Any], attempt: Attempt) -> None:
        if record["status"] != "oom" or attempt.trial.config.resources.on_oom != "halve":
            return
        smaller = halved(attempt.trial)
        if smaller is not None:
            self.sweep.total += 1
            self.start(smaller, attempt.config, retry_of=record["trial_id"])

    def cancel_all(self, kill_tasks: bool) -> None:
        """Keeps what finished meanwhile, records the rest as cancelled and, on a cluster we
        only attached to, force-cancels their tasks. A local Ray we started is shut down by
        the caller instead: its workers' zygotes and trial processes die with them
        (PR_SET_PDEATHSIG). Plain ray.cancel raced with completing tasks and aborted the driver."""
        import ray

        done, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        for ref in done:
            self.handle_quietly(ref, self.pending.pop(ref))
        for ref, attempt in self.pending.items():
            if kill_tasks:
                ray.cancel(ref, force=True)
            record = unfinished_record(attempt.spec, "cancelled", "Interrupted", "the sweep was interrupted")
            self.sweep.finish(record, attempt.config, {})
        self.pending.clear()

    def handle_quietly(self, ref, attempt: Attempt) -> None:
        import ray

        try:
            outcome = ray.get(ref, timeout=5)
            self.sweep.finish({**outcome.record, "attempts": attempt.number}, attempt.config, outcome.files)
        except Exception as exc:   # cancelled or lost on the way: record it so
            record = unfinished_record(attempt.spec, "cancelled", type(exc).__name__, "the sweep was interrupted")
            self.sweep.finish(record, attempt.config, {})
