"""The overnight suite (`python -m sweeper +sweep=overnight`): several sweeps, one night.

Safe to start from cron or a systemd timer:
- a lock (fcntl.flock on overnight.lock_file, sweeper/suitelock.py): a second start exits at
  once (75) and names the holder. The kernel drops the lock when its holder dies, however it
  dies, so there is no stale lock to clean up by hand; a suite that ends removes the file too;
- a time budget (overnight.budget_s): past it no sweep starts, and inside a sweep no
  trial starts (the driver's deadline); what was skipped is printed and written down;
- one night folder, results/overnight/<stamp>/, holding night.json (the manifest, below)
  and one ordinary run folder per sweep, <stamp>/<sweep>/<stamp>/, which every tool that
  reads a run (compare, report, history) reads unchanged;
- an exit code for the scheduler: the worst of the sweeps' codes, and 3 (REGRESSED) when
  the regression check (overnight.alerts, "module:function") returns any alert;
- a night cut short (a reboot, a kill, a full disk, a lost Ray node) is finished by the same
  command with resume=latest (or resume=<stamp>): same folder and stamp, finished sweeps kept,
  the one cut short resumed, the rest run fresh (sweeper/night_resume.py decides which).

Each sweep runs as its own `python -m sweeper +sweep=NAME` process, one after the other:
it composes its own grid as a user's run would, a crash or a leak of one sweep (DALI's
pools never shrink) ends with its process, and each sweep's folder is a standard run.
The suite's own settings (repeats=auto and its bounds, the deadline) and the user's command-line
overrides are passed on to each. docs/overnight.md describes night.json field by field.
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from sweeper import exitcodes
from sweeper.errors import ConfigError, SweeperError
from sweeper.files import write_bytes_atomic
from sweeper.interrupts import interrupted, started_by_this_suite, stop_signals
from sweeper.night_resume import (FRESH, KEEP, Step, clear_empty_run, dry_run_heading, heading, night_named,
                                  nothing_left, planned_ids, resume_args, resumed_manifest, step_line, steps_of)
from sweeper.runfolder import new_run, planned_run
from sweeper.storepath import night_store
from sweeper.suitelock import LockHeld, check_lock_path, holder_info, release_lock, take_lock

MANIFEST_VERSION = 1
# Keys of the suite's own command line that each sweep does not get: the suite sets them itself.
# resume: the suite's own resume names a night; a resumed sweep gets its run's resume from the suite.
_NOT_PASSED_ON = ("sweep", "overnight", "results_dir", "run_id", "repeats", "sequential", "resume", "hydra.sweep",
                  "hydra.run", "hydra.mode")


# -- one sweep of the suite -------------------------------------------------------------
def passed_on(overrides: List[str]) -> List[str]:
    """The user's overrides that each sweep gets too (executor=local, ray.address=..., ...)."""
    def key(o: str) -> str:
        return o.split("=", 1)[0].lstrip("+~")

    return [o for o in overrides if not any(key(o) == k or key(o).startswith(k + ".") for k in _NOT_PASSED_ON)]


def sweep_command(name: str, night: Path, stamp: str, root, overrides: List[str]) -> List[str]:
    defaults = asdict(type(root.sequential)())
    repeats = [f"repeats={root.repeats}"] + [f"sequential.{k}={'null' if v is None else v}"
                                            for k, v in asdict(root.sequential).items() if v != defaults[k]]
    deadline = [f"overnight.deadline={root.overnight.deadline!r}"] if root.overnight.deadline else []
    return [sys.executable, "-m", "sweeper", f"+sweep={name}", f"results_dir={night}", f"run_id={stamp}",
            *repeats, *deadline, *passed_on(overrides)]


SWEEP_STOP_GRACE_S = 30.0     # a stopped sweep's time to write what it has, before it is killed


def run_one(name: str, command: List[str]) -> int:
    """Runs one sweep as its own process; on Ctrl-C or SIGTERM it is told to stop too. Its
    stderr passes through this process until then, but for its own "interrupted ..." line: the
    suite says in one line that it stopped, and the manifest says where each sweep was. What a
    sweep prints while it is being stopped (its start cut short at any point) is not passed on."""
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace", env=started_by_this_suite())
    stopping = threading.Event()
    relay = threading.Thread(target=_relay_stderr, args=(proc.stderr, stopping), daemon=True)
    relay.start()
    try:
        return proc.wait()
    except KeyboardInterrupt:
        stopping.set()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=SWEEP_STOP_GRACE_S)
        except subprocess.TimeoutExpired:    # a sweep that does not stop must not hold the suite
            proc.kill()
            proc.wait()
        raise
    finally:
        relay.join(timeout=10)


def _relay_stderr(stream, stopping: threading.Event) -> None:
    for line in stream:
        if not (stopping.is_set() or line.startswith("interrupted ")):
            sys.stderr.write(line)
            sys.stderr.flush()


# -- the night ---------------------------------------------------------------------------
def run_suite(job, multirun: Optional[str] = None) -> int:
    """Runs the suite's sweeps in turn under the lock and the budget; returns the exit code.
    Ctrl-C and SIGTERM stop it as they stop a sweep, even where the shell started it with
    SIGINT ignored (a background job of a script): its handlers are set explicitly."""
    with stop_signals():
        try:
            return _suite(job, multirun)
        except SweeperError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return exc.code
        except KeyboardInterrupt:
            return interrupted("while the suite started or ended: what finished is kept")


def _suite(job, multirun: Optional[str]) -> int:
    root, started = job.config, time.time()
    resumed = night_named(root) if root.resume else None     # bad input: before the lock and anything else
    lock_file = Path(root.overnight.lock_file).expanduser()
    check_lock_path(lock_file)                  # a dry run takes no lock, but says what the night would meet
    if root.dry_run:
        check_hook_found(root.overnight.alerts)
        return _dry_run(job, resumed or planned_run(root), *steps_of(root, resumed))
    try:
        lock = take_lock(lock_file, holder_info(started))
    except LockHeld as held:
        print(f"error: {held}; this start ran nothing", file=sys.stderr, flush=True)
        return exitcodes.LOCKED
    try:
        check_hook(root.overnight.alerts)       # under the lock: a second start still exits at once
        steps, old = steps_of(root, resumed)    # under the lock: no other suite changes the night meanwhile
        if old is not None and nothing_left(resumed, steps):       # its files stay as they are
            print(nothing_left(resumed, steps), flush=True)
            return exitcodes.OK
        return _refused_sweep(job, resumed or planned_run(root), steps) or \
            _night(job, resumed or new_run(root, multirun).path, started, steps, old)
    finally:
        release_lock(lock, lock_file)


def _night(job, night: Path, started: float, steps: Optional[List[Step]] = None,
           old: Optional[Dict[str, Any]] = None) -> int:
    """The night's sweeps in turn (a new night: each fresh), night.json after each; the exit code."""
    root = job.config
    steps = steps if steps is not None else steps_of(root, None)[0]
    if root.overnight.budget_s:
        root.overnight.deadline = started + root.overnight.budget_s
    manifest = new_manifest(root, started)
    if old is not None:
        resume = {"at": started, **{k: manifest[k] for k in ("host", "pid", "command", "budget_s")}}
        manifest = resumed_manifest(old, resume, root.overnight.deadline)
        print("\n".join([heading(night, root.overnight.budget_s), *map(step_line, steps)]), flush=True)
    code, full = exitcodes.OK, False
    try:
        for step in steps:
            ended = _one_step(step, job, night, manifest, disk_full=full)
            code, full = max(code, ended), full or ended == exitcodes.NO_ROOM
            write_manifest(night, manifest)
    except KeyboardInterrupt:
        code = interrupted("while the suite ran: it stops; finished trials are kept, the manifest says what ran")
        manifest["sweeps"] += [s.entry for s in steps if s.action == KEEP and s.entry not in manifest["sweeps"]]
    code = max(code, _alerts(root.overnight.alerts, night, manifest))
    manifest.update(ended_at=time.time(), exit_code=code)
    write_manifest(night, manifest)
    _print_end(night, manifest)
    return code


def _one_step(step: Step, job, night: Path, manifest: Dict[str, Any], disk_full: bool) -> int:
    """A kept sweep's entry stands (its exit code counts); any other runs, resumed or fresh."""
    if step.action == KEEP:
        manifest["sweeps"].append(step.entry)
        return step.entry.get("exit_code") or exitcodes.OK
    if step.action == FRESH:
        clear_empty_run(night / step.name / job.config.run_id)
    return _one_sweep(step.name, job, night, manifest, disk_full, resume_args(step, job.config.run_id))


def _one_sweep(name: str, job, night: Path, manifest: Dict[str, Any], disk_full: bool = False,
               extra: Sequence[str] = ()) -> int:
    root = job.config
    entry: Dict[str, Any] = {"name": name, "run": None, "status": "skipped", "exit_code": None,
                             "started_at": None, "ended_at": None, "skipped_trials": []}
    manifest["sweeps"].append(entry)
    if disk_full:                        # each would fail the same way, and the night's record needs the room
        print(f"disk full: a sweep before it ran out of space; sweep '{name}' not started", file=sys.stderr, flush=True)
        return exitcodes.OK
    if root.overnight.deadline is not None and time.time() >= root.overnight.deadline:
        print(f"budget: the night ended; sweep '{name}' not started", file=sys.stderr, flush=True)
        return exitcodes.OK
    stamp = root.run_id
    entry.update(started_at=time.time(), run=f"{name}/{stamp}", status="running")
    write_manifest(night, manifest)
    try:
        code = run_one(name, sweep_command(name, night, stamp, root, job.overrides) + list(extra))
    except KeyboardInterrupt:
        entry.update(status="interrupted", exit_code=exitcodes.INTERRUPTED, ended_at=time.time())
        raise
    entry.update(ended_at=time.time(), exit_code=code, status=_status_of(code))
    entry["skipped_trials"] = _skipped_trials(night / name / stamp)
    return code


def _status_of(code: int) -> str:
    return {exitcodes.OK: "ok", exitcodes.TRIALS_FAILED: "failed trials", exitcodes.USAGE: "bad input",
            exitcodes.NO_ROOM: "disk full", exitcodes.NODE_LOST: "node lost",
            exitcodes.INTERRUPTED: "interrupted"}.get(code, f"exit {code}")


def _skipped_trials(run: Path) -> List[Dict[str, Any]]:
    path = run / "skipped.json"
    return json.loads(path.read_text()) if path.exists() else []


def new_manifest(root, started: float) -> Dict[str, Any]:
    return {"manifest_version": MANIFEST_VERSION, "suite": root.sweep.name, "night": root.run_id,
            "host": socket.gethostname(), "pid": os.getpid(), "command": holder_info(started)["command"],
            "started_at": started, "ended_at": None, "budget_s": root.overnight.budget_s,
            "deadline": root.overnight.deadline, "sweeps_planned": list(root.overnight.sweeps),
            "sweeps": [], "alerts": [], "exit_code": None}


def write_manifest(night: Path, manifest: Dict[str, Any]) -> None:
    """night.json, rewritten atomically after each sweep: a night cut short keeps what it did."""
    night.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(night / "night.json", json.dumps(manifest, indent=1, default=str).encode())


def skipped_of(manifest: Dict[str, Any]) -> List[str]:
    """One line per thing the night did not do: a sweep not started, or a sweep's trials."""
    lines = [f"sweep {s['name']}: not started" for s in manifest["sweeps"] if s["status"] == "skipped"]
    lines += [f"sweep {s['name']}: {len(s['skipped_trials'])} trial(s) not started"
              for s in manifest["sweeps"] if s["skipped_trials"]]
    return lines


def _print_end(night: Path, manifest: Dict[str, Any]) -> None:
    ran = ", ".join(f"{s['name']} {s['status']}" for s in manifest["sweeps"])
    print(f"overnight: {ran}; exit {manifest['exit_code']}; manifest {night / 'night.json'}", flush=True)
    for line in skipped_of(manifest):
        print(f"  skipped: {line}", flush=True)


# -- regressions: the hook --------------------------------------------------------------
def _alerts(target: Optional[str], night: Path, manifest: Dict[str, Any]) -> int:
    """Calls the regression check `overnight.alerts` ("module:function", given the night
    folder and the manifest, returning a list of alert dicts); none configured: no alerts.
    The check is another module's (the history); this suite only turns its answer into the
    exit code and the manifest."""
    if not target:
        return exitcodes.OK
    try:
        alerts = list(load_hook(target)(night, manifest) or [])
    except Exception as exc:     # a broken check must not hide the night's results
        print(f"warning: overnight.alerts={target} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        manifest["alerts_error"] = f"{type(exc).__name__}: {exc}"
        return exitcodes.OK
    manifest["alerts"] = alerts
    return exitcodes.REGRESSED if alerts else exitcodes.OK


def check_hook(target: Optional[str]) -> None:
    """The regression check imports and is a function, found before the night, not after it."""
    from sweeper.spec import _import

    if target:
        module, _, name = target.partition(":")
        if not callable(getattr(_import(module, "overnight.alerts", target), name, None)):
            raise ConfigError(f"overnight.alerts={target!r}: {module} has no function {name!r}; name one after "
                              f"the ':' (night folder, night.json dict) -> list of alerts, or overnight.alerts=null")


def check_hook_found(target: Optional[str]) -> None:
    """A dry run's check of the regression hook: its module is found, not run (the shipped hook,
    sweeper.history.morning, imports pandas: seconds the dry run does not need)."""
    from sweeper.spec import found_unrun

    module = (target or "").partition(":")[0]
    if target and not found_unrun(module):
        raise ConfigError(f"overnight.alerts={target!r}: cannot find module {module!r}; is it on PYTHONPATH "
                          f"(run from its folder)?")


def _refused_sweep(job, night: Path, steps: List[Step]) -> int:
    """Each sweep's own dry run, before the lock and the night folder: a name that is no sweep,
    or an override that one sweep refuses, is its one line and exit 2 now, not after the
    sweeps before it ran. What the dry runs print otherwise is left out (the sweeps say it again)."""
    # Before night.json exists a sweep would look for its history store in the night folder; the
    # night's own sweeps find the suite's (sweeper/storepath.py): check that one.
    store = [] if job.config.history.dir else [f"history.dir={night_store(night)}"]
    for step in (s for s in steps if s.action != KEEP):       # a resumed one with its resume: its cells are checked
        command = (sweep_command(step.name, night, job.config.run_id, job.config, job.overrides)
                   + resume_args(step, job.config.run_id) + ["dry_run=true", *store])
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        if done.returncode == exitcodes.USAGE:
            sys.stderr.write(done.stderr)
            return exitcodes.USAGE
    return exitcodes.OK


def load_hook(target: str) -> Callable[[Path, Dict[str, Any]], List[Dict[str, Any]]]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _dry_run(job, night: Path, steps: List[Step], old: Optional[Dict[str, Any]]) -> int:
    """Each sweep's own dry run (a resumed one's with its resume), under one heading that counts
    their trials; no lock, nothing launched. A sweep's dry run that fails is its own lines and
    exit code, with no plan printed over them."""
    root, outputs = job.config, []
    for step in (s for s in steps if s.action != KEEP):
        command = sweep_command(step.name, night, root.run_id, root, job.overrides) + resume_args(step, root.run_id)
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        sys.stderr.write(done.stderr)
        if done.returncode != exitcodes.OK:
            return done.returncode
        outputs.append((step, planned_ids(done.stdout), done.stdout))
    if old is not None:
        print(dry_run_heading(night, root, steps, outputs), flush=True)
    else:
        print(f"dry run: {sum(len(ids) for _, ids, _ in outputs)} trial(s) of sweep '{root.sweep.name}' "
              f"({', '.join(f'{s.name} {len(ids)}' for s, ids, _ in outputs)}, in turn), nothing launched; "
              f"budget {root.overnight.budget_s or 'none'} s; lock {root.overnight.lock_file}", flush=True)
    for _, _, out in outputs:
        print(out, end="", flush=True)
    return exitcodes.OK
