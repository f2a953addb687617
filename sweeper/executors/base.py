"""The interface every executor gives the driver (sweeper/executors/__init__.py lists them)."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence

from sweeper.isolation import Outcome
from sweeper.plan import ClusterShape, Trial


class TrialLost(Exception):
    """The executor lost a trial (its worker or node died): still a row, maybe retried. Its
    message loses the terminal colours Ray's errors carry: they would land in the row and table."""

    def __init__(self, error_type: str, message: str):
        message = re.sub(r"\x1b\[[0-9;]*m", "", message)
        super().__init__(message)
        self.error_type, self.message = error_type, message


class NodeLost(Exception):
    """The local Ray node this sweep started has stopped (its raylet or GCS server exited): nothing
    more can run on it. `what` says which process and how it ended; `logs`, the session folder
    kept for Ray's own account; `running`, the trials whose host was running on the node then."""

    def __init__(self, what: str, logs: Optional[str], running: FrozenSet[str] = frozenset()):
        super().__init__(what)
        self.what, self.logs, self.running = what, logs, running


class Executor:
    """Submit trials, wait for some to end, take their outcomes, cancel the rest."""

    # Called before each trial that runs inside the driver's process (local), so that what
    # starts while it runs is the trial's: the driver lets its background work finish first.
    before_trial: Optional[Callable[[], None]] = None
    # Whether `close` may run beside the end of the sweep (sweeper/driver.Closing): it ends and
    # reaps only the processes it started. Not the local executor's, which reaps any child the
    # driver adopted and would race with a subprocess that the end of the sweep waits on.
    closes_beside_the_end = False
    # Whether the trials run in the driver's own process (executor=local): then the start's wide
    # young generation stays until each trial puts Python's thresholds back (sweeper/trial.py).
    runs_trials_here = False

    def start(self) -> ClusterShape:
        raise NotImplementedError

    def describe(self, shape: ClusterShape) -> str:
        return (f"{len(shape.node_cpus)} node(s), {sum(shape.node_cpus):g} CPUs, "
                f"{sum(shape.node_gpus):g} GPUs")

    def submit(self, trial: Trial, spec: Dict[str, Any]) -> Any:
        raise NotImplementedError

    def wait(self, handles: Sequence[Any], timeout_s: float, all_ready: bool = False) -> List[Any]:
        """Handles that have ended: at least one unless the timeout passed; with `all_ready`,
        every one that has ended by then, starting nothing new."""
        raise NotImplementedError

    def outcome(self, handle: Any) -> Outcome:
        """The ended trial's outcome; raises TrialLost when the executor lost it."""
        raise NotImplementedError

    def cancel(self, handles: Sequence[Any]) -> None:
        raise NotImplementedError

    def node_lost(self) -> Optional[NodeLost]:
        """Whether the node this executor started and runs every trial on has stopped (None: it
        has not, or the executor started none: a cluster it only attached to keeps Ray's ways)."""
        return None

    def close(self) -> None:
        pass
