"""The zygote: a single-threaded process that has imported torch once and forks
one fresh child per trial.

A fresh interpreter that imports torch costs seconds; a fork of one that already
has costs milliseconds, and the child still shares nothing with the last trial
(it is a new process, copy-on-write from a parent that never ran a trial).
CUDA is never initialised here, so each child can start it for its own GPUs.

Protocol, one JSON object a line: the host writes {"scratch": dir, "env": {...}};
the zygote answers {"pid": n} when the child starts and {"pid": n, "exit": code,
"signal": sig} when it ends. The child reads its spec from <scratch>/spec.pkl.
"""
from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import sys
import traceback
from pathlib import Path

# Imported once here so each trial's fork starts warm; none of them initialises CUDA.
PRELOAD = ("torch", "numpy", "pandas", "pyarrow", "pyarrow.parquet", "psutil", "webdataset", "sweeper.trial",
           "sweeper.fingerprint", "sweeper.measure.build", "workloads.dataloader", "workloads.train_step")


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so no trial outlives its host."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


def _child(request: dict, protocol_fd: int) -> None:
    os.setsid()                      # own process group: a timeout kills the trial and its loader workers
    die_with_parent()
    os.close(protocol_fd)
    scratch = Path(request["scratch"])
    log = os.open(scratch / "trial.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.environ.update(request.get("env", {}))
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 0
    try:
        from sweeper.trial import execute

        spec = pickle.loads((scratch / "spec.pkl").read_bytes())
        execute(spec, scratch)
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:   # a trial that needs it will fail with the real error
            print(f"zygote: could not preload {name}: {exc}", file=sys.stderr)
    try:   # cached here so every child skips the `git rev-parse` (no CUDA is touched)
        from sweeper.fingerprint import git_commit

        git_commit()
    except Exception:
        pass


def main() -> None:
    die_with_parent()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)                    # stray prints must not corrupt the protocol
    out = os.fdopen(protocol_fd, "w", buffering=1)
    _preload()
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, protocol_fd)
        out.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    main()
