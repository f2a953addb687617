"""Runs each trial in a process of its own, forked from a warm zygote.

`TrialHost.run` is what a Ray task calls (and what the in-process path calls):
it hands the spec to the zygote, waits for the child with a wall-clock limit,
ends everything the child started (DataLoader workers, new-session children and
daemons too: see sweeper.containment) when the limit passes or the caller is cancelled, and returns the child's record plus
the bytes of the files it wrote, so the driver can write them on its own disk.
"""
from __future__ import annotations

import json
import os
import pickle
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Optional, Sequence

from sweeper._zygote import STOP_GRACE_S
from sweeper.nodezygote import connect_zygote, start_zygote
from sweeper.record import TrialRecord
from sweeper.standby import LOCKS

LOG_TAIL_LINES = 40
LOG_HEAD_BYTES = 1 << 20  # of a trial's output (trial.log), the start and the end are kept: a workload that
LOG_END_BYTES = 4 << 20   # prints for hours would otherwise fill the driver's memory and the results disk
ZYGOTE_START_S = 300      # a zygote's imports: seconds usually, minutes on a loaded node
ZYGOTE_LOST = ("the trial zygote exited while this trial ran, and took it down (killed from outside: the kernel's "
               "OOM killer picks large processes, and a zygote holds torch); the trials after it start from a new one")


@dataclass
class Outcome:
    record: TrialRecord
    files: Dict[str, bytes] = field(default_factory=dict)


def scratch_root(spec: Dict[str, Any]) -> Optional[str]:
    """The driver's folder for trial scratch folders when it is on this node (the driver
    removes it on every exit path, so a trial cancelled with its worker leaves nothing); else
    the system's temporary folder."""
    root = spec.get("scratch_root")
    return root if root and os.path.isdir(root) else None


def scratch_prefix(trial_id: str) -> str:
    """A trial's scratch folder's name, less mkdtemp's random tail: present while its host runs."""
    return f"sweeper-{trial_id}-"


def hosted_in(root: Optional[str], trial_ids) -> FrozenSet[str]:
    """Those of `trial_ids` whose host runs now with its scratch folder in `root` (the driver's)."""
    try:
        names = os.listdir(root) if root else []
    except OSError:
        return frozenset()
    return frozenset(t for t in trial_ids if any(n.startswith(scratch_prefix(t)) for n in names))


def log_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def kept_log(path: Path) -> bytes:
    """A trial's output as the run keeps it: whole up to LOG_HEAD_BYTES + LOG_END_BYTES, else its
    start and its end with a line between that says how much was left out."""
    if not path.exists():
        return b""
    size = path.stat().st_size
    with open(path, "rb") as log:
        if size <= LOG_HEAD_BYTES + LOG_END_BYTES:
            return log.read()
        head = log.read(LOG_HEAD_BYTES)
        log.seek(size - LOG_END_BYTES)
        end = log.read()
    cut = size - len(head) - len(end)
    return (head + f"\n[sweeper: {cut} bytes of this trial's output left out here; its first {len(head)} and last "
            f"{len(end)} bytes are kept]\n".encode() + end)


class _LineReader:
    """Reads newline-terminated JSON from a pipe with a deadline."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def read(self, timeout_s: Optional[float]) -> Optional[dict]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return None
            try:
                chunk = os.read(self.fd, 65536)
            except ConnectionResetError:       # it died with our request unread
                chunk = b""
            if not chunk:
                raise EOFError("the trial zygote exited")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


class TrialHost:
    """Runs trials through a zygote: its own, started on first use, or a shared one at `socket_path`."""

    def __init__(self, socket_path: Optional[str] = None, preload: Sequence[str] = ()) -> None:
        self.socket_path, self.preload = socket_path, list(preload)
        self.proc: Optional[subprocess.Popen] = None
        self.owns_zygote = socket_path is None

    def _ensure_zygote(self) -> None:
        if not self.owns_zygote or (self.proc is not None and self.proc.poll() is None):
            return
        # an abstract socket ("@" for the leading NUL): nothing on disk to leave behind when a
        # Ray worker is killed with its zygote
        self.socket_path = f"@sweeper-zygote-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.proc = start_zygote(self.socket_path, self.preload, stdout=subprocess.PIPE)
        _LineReader(self.proc.stdout.fileno()).read(timeout_s=ZYGOTE_START_S)   # {"ready": pid}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


    def _connect(self) -> socket.socket:
        """A connection to the zygote; where the node's shared one no longer listens (killed from
        outside), to one of this worker's own from then on, so the trials after it still run."""
        try:
            return connect_zygote(self.socket_path, wait_s=10.0 if self.owns_zygote else 1.0)   # its socket was there
        except (ConnectionRefusedError, FileNotFoundError):
            if self.owns_zygote:
                raise
            self.owns_zygote = True
            self._ensure_zygote()
            return connect_zygote(self.socket_path)

    def run(self, spec: Dict[str, Any], timeout_s: float, env: Dict[str, str]) -> Outcome:
        try:
            return self._run(spec, timeout_s, env)
        except _NotStarted:                    # the node's zygote died before it forked this trial
            self.owns_zygote = True
            return self._run(spec, timeout_s, env)

    def _run(self, spec: Dict[str, Any], timeout_s: float, env: Dict[str, str]) -> Outcome:
        self._ensure_zygote()
        scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(spec['trial_id']), dir=scratch_root(spec)))
        conn = self._connect()
        try:
            (scratch / "spec.pkl").write_bytes(pickle.dumps(spec))
            reader = _LineReader(conn.fileno())
            try:
                request = trial_request(spec, scratch, env)
                if self.owns_zygote:             # this worker's own: its next trial may be on other GPUs
                    request.pop("next", None)
                conn.sendall((json.dumps(request) + "\n").encode())
                started = reader.read(timeout_s=ZYGOTE_START_S)    # a shared zygote may still be importing
            except (EOFError, BrokenPipeError, ConnectionResetError):
                if self.owns_zygote:
                    raise
                raise _NotStarted() from None
            if started is None:
                raise RuntimeError(f"the trial zygote at {self.socket_path} did not start the trial "
                                   f"within {ZYGOTE_START_S} s")
            pid = started["pid"]
            status = "ok"
            try:
                ended = reader.read(timeout_s=timeout_s)
            except EOFError:                   # the zygote died: its keeper ended the trial (its death signal)
                _kill_group(pid)
                return _lost_with_zygote(spec, scratch, pid)
            except BaseException:              # cancelled (Ctrl-C, ray.cancel): take the trial down too
                try:
                    _stop_trial(pid, reader)
                except BaseException:          # a second interrupt, or the zygote gone: the backstop only
                    _kill_group(pid)
                raise
            if ended is None:
                status = "timeout"
                ended = _stop_trial(pid, reader) or {"exit": None}
            outcome = collect(spec, scratch, ended.get("exit"), status, timeout_s)
            outcome.record.pid = pid
            return outcome
        finally:
            conn.close()
            shutil.rmtree(scratch, ignore_errors=True)


def trial_request(spec: Dict[str, Any], scratch: Optional[Path], env: Dict[str, str]) -> Dict[str, Any]:
    """What the zygote is asked for a trial. With prestart (resources.prestart; by default for a
    trial with GPUs, where the driver's scratch folder is on this node to hold the GPUs' locks):
    the record back while the process still ends, and a standby for the next trial if one follows."""
    wanted = spec["config"].resources.prestart
    if wanted is None:
        wanted = bool(env.get("CUDA_VISIBLE_DEVICES"))
    root = scratch_root(spec)
    where = str(scratch) if scratch is not None else None
    if not wanted or root is None:
        return {"scratch": where, "env": env}
    return {"scratch": where, "env": {**env, LOCKS: root}, "prestart": True,
            "next": bool(spec.get("more_to_come"))}


class _NotStarted(Exception):
    """The shared zygote closed the connection before it started the trial: nothing ran."""


def _lost_with_zygote(spec: Dict[str, Any], scratch: Path, pid: int) -> Outcome:
    """The row of a trial whose zygote died under it, with what it printed."""
    from sweeper.trial import LOG_FILE

    log = kept_log(scratch / LOG_FILE)
    record = TrialRecord.for_spec(spec, status="failed", error_type="TrialKilled", error_message=ZYGOTE_LOST, pid=pid,
                                  log_tail=log_tail(log.decode(errors="replace")))
    return Outcome(record, {LOG_FILE: log} if log else {})


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop_trial(pid: int, reader: _LineReader) -> Optional[dict]:
    """Asks the trial's keeper (SIGTERM) to end everything the trial started, new sessions
    included; SIGKILL to its process group is the backstop when it has not within the grace."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    ended = reader.read(timeout_s=STOP_GRACE_S)
    if ended is None:
        _kill_group(pid)
        ended = reader.read(timeout_s=30)
    return ended


def collect(spec: Dict[str, Any], scratch: Path, exit_code: Optional[int], status: str,
            timeout_s: float) -> Outcome:
    """The child's record and files; a record of our own when it left none."""
    from sweeper.trial import LOG_FILE, RECORD_FILE     # here: the trial's module imports numpy and the probe

    record_path = scratch / RECORD_FILE
    log_bytes = kept_log(scratch / LOG_FILE)
    log = log_bytes.decode(errors="replace")
    if status == "ok" and record_path.exists():
        record = TrialRecord.from_dict(json.loads(record_path.read_text()))
    else:
        error_type, message = _exit_reason(status, exit_code, timeout_s)
        record = TrialRecord.for_spec(spec, status=status if status != "ok" else "failed",
                                      error_type=error_type, error_message=message)
    if record.status != "ok":
        record.log_tail = log_tail(log)
    files = {p.name: log_bytes if p.name == LOG_FILE else p.read_bytes() for p in scratch.iterdir()
             if p.is_file() and p.name not in ("spec.pkl", RECORD_FILE) and not p.name.startswith(".")}
    return Outcome(record=record, files=files)


def _exit_reason(status: str, exit_code: Optional[int], timeout_s: float) -> tuple:
    if status == "timeout":
        return "TrialTimeout", f"ran past resources.timeout_s={timeout_s:g} s and was killed with every process it started"
    if exit_code is not None and exit_code < 0:
        name = signal.Signals(-exit_code).name
        return "TrialKilled", f"the trial process was killed by {name}"
    return "TrialCrashed", f"the trial process exited with code {exit_code} and left no record"


_HOSTS: Dict[Optional[str], TrialHost] = {}


def shared_host(node_zygote: Optional[str] = None, preload: Sequence[str] = ()) -> TrialHost:
    """The zygote this process runs trials through: the node's shared one when its socket is
    here (the driver started it on this machine), else one of this worker's own, reused
    across the trials the worker runs."""
    key = node_zygote if node_zygote and os.path.exists(node_zygote) else None
    if key not in _HOSTS:
        _HOSTS[key] = TrialHost(key, preload)
    return _HOSTS[key]
