"""Trials one at a time inside the driver's own process: for a debugger or a profiler.

`python -m sweeper executor=local ...` runs each trial's workload in this process, so a
breakpoint in it stops the sweep there and `nsys profile python -m sweeper executor=local`
sees every trial. What it gives up: no process per trial (a trial's threads, seeds and
memory cap stay set for the next; DeepSpeed keeps its process group, so a run of more than
one DeepSpeed trial is refused before any starts: sweeper.preflight.in_process_line), no
timeout, and a trial that kills its own process ends the sweep. Records, summary, tables, exit codes and publishers are the driver's,
the same as with Ray. What a trial starts still ends with it: this process is a child
subreaper, so a daemon the trial double-forks comes back below it, and every process that
appeared below it during the trial is ended when the trial returns.
Where the command line says so and leaves the trial a GPU, CUDA's start begins with the command,
beside Hydra's composing (sweeper/cudastart.py).
"""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Dict, List, Sequence, TextIO

from sweeper.cudastart import visible_gpus
from sweeper.executors.base import Executor
from sweeper.isolation import Outcome, collect, scratch_root
from sweeper.plan import ClusterShape, Trial, planned_device


def _children() -> list:
    import psutil

    return psutil.Process().children()


def gpu_models(root: str = "/proc/driver/nvidia/gpus") -> List[str]:
    """This machine's GPU model names ("NVIDIA H200"), from the driver's /proc files: no torch, no CUDA."""
    names = []
    for info in sorted(Path(root).glob("*/information")) if os.path.isdir(root) else []:
        try:
            lines = info.read_text().splitlines()
        except OSError:
            continue
        names += [line.split(":", 1)[1].strip() for line in lines if line.startswith("Model:")]
    return names


def this_machine() -> ClusterShape:
    return ClusterShape(node_cpus=[float(os.cpu_count() or 1)], node_gpus=[float(visible_gpus())])


class Redacting(io.TextIOBase):
    """A terminal stream that hides credentials in what the trial prints here (its traceback of a
    failed shard URL, say): with Ray that output goes to trial.log, which is redacted when written."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        from sweeper.redact import redact_text

        self.stream.write(redact_text(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


class LocalExecutor(Executor):
    runs_trials_here = True

    def __init__(self) -> None:
        self.queue: List[int] = []
        self.specs: Dict[int, Dict[str, Any]] = {}
        self.done: Dict[int, Outcome] = {}

    def start(self) -> ClusterShape:
        from sweeper.containment import is_child_subreaper, set_child_subreaper

        self.was_subreaper = is_child_subreaper()
        self.children_before = {p.pid for p in _children()}
        set_child_subreaper()
        return this_machine()

    def close(self) -> None:
        """The process that ran the sweep in-process (a test, a notebook) is a subreaper no longer,
        and the orphans it adopted meanwhile are reaped, not left as zombies."""
        from sweeper import cudastart
        from sweeper.containment import set_child_subreaper

        cudastart.release()
        if not getattr(self, "was_subreaper", True):
            set_child_subreaper(False)
        for child in _children():    # only those adopted during the sweep: the caller may wait on its own
            if child.pid not in getattr(self, "children_before", ()):
                try:
                    os.waitpid(child.pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def describe(self, shape: ClusterShape) -> str:
        return f"this process, one trial at a time ({super().describe(shape)})"

    def submit(self, trial: Trial, spec: Dict[str, Any]) -> int:
        handle = len(self.specs)
        self.specs[handle] = spec
        self.queue.append(handle)
        return handle

    def wait(self, handles: Sequence[int], timeout_s: float, all_ready: bool = False) -> List[int]:
        ready = [h for h in handles if h in self.done]
        if ready or all_ready or not self.queue:
            return ready
        handle = self.queue.pop(0)
        self.done[handle] = self._run(self.specs[handle])
        return [handle]

    def _run(self, spec: Dict[str, Any]) -> Outcome:
        from sweeper import cudastart
        from sweeper.containment import descendants, end_new_descendants
        from sweeper.trial import execute

        cudastart.settle(planned_device(spec["config"], spec["num_gpus"]) == "cuda")
        if self.before_trial is not None:
            self.before_trial()
        before = descendants()
        scratch = Path(tempfile.mkdtemp(prefix=f"sweeper-{spec['trial_id']}-", dir=scratch_root(spec)))
        try:
            with redirect_stdout(Redacting(sys.stdout)), redirect_stderr(Redacting(sys.stderr)):
                execute(spec, scratch)
            outcome = collect(spec, scratch, 0, "ok", spec["config"].resources.timeout_s)
            outcome.record.worker_pid = os.getpid()
            return outcome
        finally:
            end_new_descendants(before)
            shutil.rmtree(scratch, ignore_errors=True)

    def outcome(self, handle: int) -> Outcome:
        return self.done.pop(handle)

    def cancel(self, handles: Sequence[int]) -> None:
        self.queue = [h for h in self.queue if h not in set(handles)]
