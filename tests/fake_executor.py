"""An executor that runs nothing: each trial ends as a script says, at once, in this process.

The driver's own behaviour (retries, OOM shrinking, timeouts, cancel, resume, the window,
the deadline, the run folder, signals) is then tested in-process in milliseconds; what only
Ray or a real trial process can show stays in the slow tests.

    script(spec, attempt) -> "ok" | "failed" | "oom" | "timeout" | "killed" | "lost"
                             | a callable run when the trial is waited for (raise, signal, ...)
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

from sweeper.executors.base import Executor, TrialLost
from sweeper.isolation import Outcome
from sweeper.plan import ClusterShape, Trial
from sweeper.record import TrialRecord

OUTCOMES = {
    "failed": ("failed", "ValueError", "injected failure"),
    "oom": ("oom", "OutOfMemoryError", "CUDA out of memory (injected)"),
    "timeout": ("timeout", "TrialTimeout", "ran past resources.timeout_s and was killed"),
    "killed": ("failed", "TrialKilled", "the trial process was killed by SIGKILL"),
}


def record_of(spec: Dict[str, Any], kind: str) -> TrialRecord:
    if kind == "ok":
        return TrialRecord.for_spec(spec, status="ok", summary={"items_per_s": 100.0 + spec["repeat"], "steps": 5},
                                    pid=4242)
    status, error_type, message = OUTCOMES[kind]
    return TrialRecord.for_spec(spec, status=status, error_type=error_type, error_message=message,
                                pid=None if kind == "killed" else 4242)


class FakeExecutor(Executor):
    def __init__(self, script: Callable[[Dict[str, Any], int], Any] = lambda spec, attempt: "ok",
                 shape: ClusterShape = ClusterShape([2.0], [0.0])) -> None:
        self.script, self.shape = script, shape
        self.specs: Dict[int, Dict[str, Any]] = {}
        self.attempts: Dict[str, int] = {}
        self.order: List[int] = []            # submitted, not yet waited for
        self.submitted: List[Dict[str, Any]] = []
        self.most_waiting = 0                 # the most trials held at once: the window
        self.cancelled: List[str] = []
        self.closed = False

    def start(self) -> ClusterShape:
        return self.shape

    def submit(self, trial: Trial, spec: Dict[str, Any]) -> int:
        handle = len(self.specs)
        self.specs[handle] = spec
        self.order.append(handle)
        self.submitted.append(spec)
        self.most_waiting = max(self.most_waiting, len(self.order))
        return handle

    def wait(self, handles: Sequence[int], timeout_s: float, all_ready: bool = False) -> List[int]:
        if all_ready or not self.order:
            return []
        handle = self.order.pop(0)
        spec = self.specs[handle]
        self.attempts[spec["trial_id"]] = self.attempts.get(spec["trial_id"], 0) + 1
        kind = self.script(spec, self.attempts[spec["trial_id"]])
        if callable(kind):                     # an event while the trial runs (a signal): it has not ended
            self.order.insert(0, handle)
            self.attempts[spec["trial_id"]] -= 1
            kind()
            return []
        return [handle]

    def outcome(self, handle: int) -> Outcome:
        spec = self.specs[handle]
        kind = self.script(spec, self.attempts[spec["trial_id"]])
        if kind == "lost":
            raise TrialLost("NodeDiedError", "the node running this trial died (injected)")
        return Outcome(record_of(spec, kind), {"trial.log": b"a line\n"})

    def cancel(self, handles: Sequence[int]) -> None:
        self.cancelled += [self.specs[h]["trial_id"] for h in handles]
        self.order = [h for h in self.order if h not in set(handles)]

    def close(self) -> None:
        self.closed = True
