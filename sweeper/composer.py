"""executor=local: the configs composed in a child while this process imports torch.

With executor=local the trials run inside the command's own process (a debugger, a profiler), so
that process must compose the configs (Hydra: 0.5-1 s) and then import torch (seconds) one after
the other: Python runs one thread at a time, and both are CPU-bound imports and code. Forked as the
command starts, before Hydra is imported, a child composes, checks and plans nothing more than it
would have, and hands the composed jobs back over a pipe; meanwhile this process imports torch and
what the driver needs, on another core. Then it runs the sweep itself, as before: the trials are
still in the process the user started. A mistake found while composing is the child's one line and
exit code, which this process passes on without running anything; a Ctrl-C before the hand-off is
the child's to report. Only where argv alone says executor=local (sweeper/headstart.py): a file that
sets it composes in the one process, as before.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from typing import List, NoReturn, Optional

_HAND_OFF: Optional[int] = None      # in the child: the pipe the composed jobs go back on
WARM = ("torch", "numpy", "pandas", "pyarrow.parquet", "psutil", "sweeper.entry", "sweeper.driver", "sweeper.trial",
        "sweeper.probe", "sweeper.analysis.run", "sweeper.publishers", "sweeper.executors.local")


def split(uses_gpu: bool) -> None:
    """Forks the composing child and returns in it; this process becomes the runner, which never
    returns. CUDA's start (sweeper/cudastart.py) is the runner's: its trials use it."""
    global _HAND_OFF
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        from sweeper.containment import set_death_signal

        set_death_signal(signal.SIGKILL)     # the command's own process gone: nothing to hand to
        _HAND_OFF = write_end
        return
    os.close(write_end)
    _run(child, read_end, uses_gpu)


def composing() -> bool:
    return _HAND_OFF is not None


def hand_off(jobs: List, multirun: Optional[str]) -> int:
    """In the child, once every job is composed and checked: the jobs (and the credentials to
    redact) to the command's process, which runs them."""
    from sweeper.redact import remembered

    data = pickle.dumps((jobs, multirun, remembered()))
    with os.fdopen(_HAND_OFF, "wb") as pipe:
        pipe.write(data)
    return 0


def _run(child: int, read_end: int, uses_gpu: bool) -> NoReturn:
    # Before the hand-off a stop is the child's to report: a Ctrl-C reaches it from the terminal, and
    # a SIGTERM sent to this process (a scheduler's, `timeout`'s) is passed on to it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: _pass_on(child, signal.SIGTERM))
    if uses_gpu:
        from sweeper import cudastart

        cudastart.start()
    threading.Thread(target=_warm, name="sweeper-warm-imports", daemon=True).start()
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    if not data or code != 0:                        # the child said why (or was stopped): nothing runs
        os._exit(code if code >= 0 else 128 - code)
    signal.signal(signal.SIGINT, signal.default_int_handler)     # cli.run sets both its own way
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from sweeper import cli

    cli.exit_with(cli.run(lambda: _run_jobs(data), interrupted=cli.SWEEP_INTERRUPTED))
    raise SystemExit(1)                               # not reached


def _pass_on(child: int, signum: int) -> None:
    try:
        os.kill(child, signum)
    except ProcessLookupError:       # it has ended: its code is what this process ends with
        pass


def _run_jobs(data: bytes) -> int:
    from sweeper.entry import run_jobs
    from sweeper.redact import remember_literals

    jobs, multirun, remembered = pickle.loads(data)
    remember_literals(remembered)
    return run_jobs(jobs, multirun)


def _warm() -> None:
    import importlib

    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception:            # what fails here fails again, with its own error, where it is used
            pass
    sys.stdout.flush()
