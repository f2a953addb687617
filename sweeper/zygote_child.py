"""What a zygote's fork runs (sweeper/_zygote.py): the trial's keeper, the trial process, and a
standby trial process that starts CUDA before its trial is known (sweeper/standby.py)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

from sweeper import containment
from sweeper.standby import give_back_gpu_memory, hold_open, lock_paths, open_locks, release
from sweeper.timeline import mark


def run_keeper(request: dict, zygote: int, report: Optional[int] = None, feed: Optional[int] = None,
               locks: Sequence[int] = ()) -> None:
    """The trial's keeper: its own group and session, a subreaper above the trial process. With
    `feed`, a standby's: its trial process learns its scratch folder only when a request comes."""
    os.setsid()                      # own process group: a timeout kills the trial and its loader workers
    if not containment.die_with(zygote, signal.SIGTERM):   # SIGTERM: the keeper ends the trial's whole tree
        os._exit(1)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.environ.update(request.get("env", {}))
    ending = [] if report is None else open_locks(lock_paths())   # shared with the trial: see _record_written
    if feed is None:
        scratch = Path(request["scratch"])
        _output_to(scratch)
        containment.keep(lambda: _trial(scratch, report, ending), after=lambda: _drop_if_orphaned(scratch, zygote))
    told, tell = os.pipe()           # the standby tells its keeper which trial it became
    os.set_blocking(told, False)

    def forked() -> None:            # the keeper keeps neither the locks nor the feed: a standby that
        release(locks)               # died is then seen dead when it is handed a trial
        os.close(feed)

    containment.keep(lambda: _standby(feed, report, locks, tell, ending),
                     after=lambda: _drop_if_orphaned(_told(told), zygote), forked=forked)


def _output_to(scratch: Path) -> None:
    log = os.open(scratch / "trial.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _told(told: int) -> Optional[Path]:
    try:
        line = os.read(told, 65536).decode().strip()
    except OSError:
        return None
    return Path(line) if line else None


def drop_scratch(scratch: Path) -> None:
    """A trial's scratch folder that no host will read any more (it holds the host's spec.pkl)."""
    if (scratch / "spec.pkl").is_file():
        shutil.rmtree(scratch, ignore_errors=True)


def _drop_if_orphaned(scratch: Optional[Path], zygote: int) -> None:
    """The keeper, its trial ended: with the zygote gone (its Ray worker killed), so is the host
    that would have read the scratch folder."""
    if scratch is not None and _zygote_gone(zygote):
        drop_scratch(scratch)


def _zygote_gone(zygote: int) -> bool:
    """Whether the zygote has died or is dying. Its parent id alone does not say: the zygote has
    threads (torch's, pyarrow's), and when its main thread exits first, Linux hands its children
    to a sibling thread of the same process (the same parent id) and sends them their death
    signal already; the main thread is then a zombie until the others have exited."""
    if os.getppid() != zygote:
        return True
    try:
        state = Path(f"/proc/{zygote}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _trial(scratch: Path, report: Optional[int] = None, ending: Sequence[int] = ()) -> None:
    """The trial process itself, forked by its keeper."""
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 0
    try:
        from sweeper.trial import execute

        spec = pickle.loads((scratch / "spec.pkl").read_bytes())
        execute(spec, scratch)
        if report is not None:
            _record_written(report, ending)
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _record_written(report: int, ending: Sequence[int]) -> None:
    """Says the record is whole, so the host reads it while this process ends (its CUDA context:
    0.1 s and more). Its GPU memory is given back first, so the next trial's set-up finds it free;
    what is left (the context) goes with the process. The GPUs' locks, taken on descriptors its
    keeper opened too, are held until the keeper has ended everything below it: the next trial's
    measured steps do not overlap that end."""
    sys.stdout.flush()
    sys.stderr.flush()
    give_back_gpu_memory()
    hold_open(ending)
    os.write(report, b"done\n")


def _standby(feed: int, report: int, locks: Sequence[int], tell: int, ending: Sequence[int]) -> None:
    """A standby trial process: starts CUDA on its GPUs, lets them go (`locks`), says it is ready,
    then waits for the request that makes it a trial. One whose CUDA did not start says nothing and
    ends; the zygote then forks that environment's trials fresh."""
    null = os.open(os.devnull, os.O_WRONLY)     # a warning of CUDA's start is not a trial's output
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        from sweeper.standby import warm_device

        warm_device()
    except BaseException:
        os._exit(0)
    finally:
        release(locks)
    mark("standby_ready")
    os.write(report, b"ready\n")
    line = _read_line(feed)
    if not line:                     # discarded, or the zygote is gone
        os._exit(0)
    scratch = Path(json.loads(line)["scratch"])
    os.write(tell, (str(scratch) + "\n").encode())
    _output_to(scratch)
    _trial(scratch, report, ending)


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        data += chunk
    return data


