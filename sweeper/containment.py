"""Nothing a trial (or a local Ray) starts outlives it.

A process group is not a container: a child started with `start_new_session=True`, or a
daemon that double-forks and calls setsid(), leaves the group, and when its parent dies it
is re-parented to init, out of reach of `killpg`. Two Linux facilities keep such processes
findable:

- a *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`): orphans below it are re-parented
  to it instead of init, so `psutil.Process().children(recursive=True)` still lists them;
- a cgroup v2 of the trial's own, where writable: `cgroup.kill` ends every process in it at
  once, forks in flight included.

Each trial therefore runs under a *keeper* (`keep`), a subreaper that forks the trial, waits
for it, and ends everything below it when the trial ends or when it is told to stop (SIGTERM).

The local Ray cluster is the other escape: a driver killed with SIGKILL leaves Ray's agents
running. `guard_local_ray` starts a watchdog (`python -m sweeper.containment`) in a session
of its own that ends that Ray session's processes when the driver dies.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
import traceback
from typing import Callable, Dict, Iterable, List, NoReturn, Optional, Sequence

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_DEADLINE_S = 10.0       # a process stuck in the kernel (D state) cannot die; don't wait for it for ever
CGROUP_ROOT = "/sys/fs/cgroup"


def _prctl(option: int, value: int) -> bool:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except OSError:
        return False


def set_child_subreaper() -> bool:
    """Orphans below this process come back to it instead of init, so it can still end them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_death_signal(sig: int) -> bool:
    """Linux sends `sig` to this process when its parent dies."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


# -- ending a tree ------------------------------------------------------------------
def reap_children() -> Dict[int, int]:
    """Collects every child that has ended (ours, or orphans re-parented here); {pid: exit code}."""
    reaped: Dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = os.waitstatus_to_exitcode(status)


def _kill(procs: Iterable[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.kill()              # psutil checks the create time first: a reused pid is left alone
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def kill_descendants(deadline_s: float = KILL_DEADLINE_S) -> Dict[int, int]:
    """SIGKILLs every descendant of this process, again until none is left (a child may fork
    while we list), reaping those that come back here; returns {pid: exit code} of the reaped."""
    me = psutil.Process()
    reaped: Dict[int, int] = {}
    end = time.monotonic() + deadline_s
    while True:
        reaped.update(reap_children())
        try:
            left = me.children(recursive=True)
        except psutil.Error:
            left = []
        if not left or time.monotonic() > end:
            return reaped
        _kill(left)
        time.sleep(0.01)         # let the kills land and the orphans re-parent here


def kill_tree(proc: psutil.Process) -> None:
    """SIGKILLs a process and everything below it, listed before any of them dies."""
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        tree = [proc]
    _kill(tree)


def kill_orphans(keep: Iterable[int]) -> None:
    """For a subreaper (the zygote): SIGKILLs each child not in `keep`, with its tree. Such a
    child is an orphan that came back here because the process that owned it was killed."""
    wanted = set(keep)
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        if child.pid not in wanted:
            kill_tree(child)


# -- a cgroup of the trial's own ----------------------------------------------------
def _cgroup2_mounted() -> bool:
    try:
        with open("/proc/self/mounts") as mounts:
            return any(line.split()[1:3] == [CGROUP_ROOT, "cgroup2"] for line in mounts)
    except OSError:
        return False


def _own_cgroup() -> Optional[str]:
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


class TrialCgroup:
    """A cgroup v2 under this process's own, made by the keeper; the trial moves itself in."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls) -> Optional["TrialCgroup"]:
        """None where cgroup v2 is not mounted, not ours to write, or too old for cgroup.kill."""
        try:
            own = _own_cgroup() if _cgroup2_mounted() else None
            if own is None:
                return None
            path = os.path.join(CGROUP_ROOT, own.lstrip("/"), f"sweeper-trial-{os.getpid()}")
            os.mkdir(path)
        except OSError:
            return None
        if not os.path.exists(os.path.join(path, "cgroup.kill")):
            cls(path).remove()
            return None
        return cls(path)

    def enter(self) -> bool:
        """Moves the calling process in; its children are born inside."""
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return True
        except OSError:
            return False

    def kill(self) -> None:
        """Every process inside, at once: nothing can fork its way out."""
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass

    def remove(self) -> None:
        for _ in range(100):          # empties a moment after the kill
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


# -- the keeper ---------------------------------------------------------------------
def _exit_like(code: int) -> NoReturn:
    """Ends the keeper as the trial ended, so the host reads the same exit status
    (a signal too: a trial killed by SIGKILL still reads as TrialKilled)."""
    if code < 0:
        sig = -code
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))    # the trial's own core is enough
            if sig not in (signal.SIGKILL, signal.SIGSTOP):      # those two have no handler to reset
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        code = 128 + sig         # a signal whose default is to ignore: exit as a shell reports it
    os._exit(code & 0xFF)


def _next_signal() -> Optional[int]:
    info = signal.sigtimedwait([signal.SIGCHLD, signal.SIGTERM], 1.0)
    return None if info is None else info.si_signo


def keep(trial: Callable[[], None]) -> NoReturn:
    """Runs in the process that will stand for the trial (the zygote's fork): become a subreaper,
    fork the real trial, wait for it, then end every process below, whichever way it ended.
    Never returns: an error here must not carry the fork back into the caller's code."""
    try:
        code = _keep(trial)
    except BaseException:
        traceback.print_exc()
        kill_descendants()
        code = 70
    _exit_like(code)


def _keep(trial: Callable[[], None]) -> int:
    set_child_subreaper()
    group = TrialCgroup.create()
    # blocked before the fork, so neither signal is lost; waited for with sigtimedwait below
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD, signal.SIGTERM])
    keeper = os.getpid()
    pid = os.fork()
    if pid == 0:
        _trial_process(trial, keeper, group)
    code = _wait_trial(pid)                    # None: the host's SIGTERM came first
    if group is not None:
        group.kill()
    kill_descendants()
    if group is not None:
        group.remove()
    return -signal.SIGTERM if code is None else code


def _trial_process(trial: Callable[[], None], keeper: int, group: Optional[TrialCgroup]) -> NoReturn:
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])      # the trial and what it execs see no blocked signals
        set_death_signal(signal.SIGKILL)
        if os.getppid() == keeper:                           # else the keeper is already gone
            if group is not None:
                group.enter()
            trial()                                          # exits by itself
    finally:
        os._exit(70)


def _wait_trial(pid: int) -> Optional[int]:
    """The trial's exit code, or None when SIGTERM (the host's stop) comes first. Orphans that
    re-parent here and end meanwhile are reaped on the way."""
    while True:
        reaped = reap_children()
        if pid in reaped:
            return reaped[pid]
        if _next_signal() == signal.SIGTERM:
            return None


# -- the local Ray ------------------------------------------------------------------
class RayGuard:
    """The watchdog of one local Ray session; `close()` after a normal `ray.shutdown()`."""

    def __init__(self, proc: Optional[subprocess.Popen]) -> None:
        self.proc = proc

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()              # the watchdog takes SIGTERM as "stand down"
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _identity(proc: psutil.Process) -> List:
    return [proc.pid, proc.create_time()]


def guard_session(session_dir: Optional[str]) -> RayGuard:
    """Starts the watchdog for this process (the driver) and what it started so far."""
    me = psutil.Process()
    known = []
    for child in me.children(recursive=True):
        try:
            known.append(_identity(child))
        except psutil.Error:
            pass
    args = {"driver": _identity(me), "session_dir": session_dir, "pids": known}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen([sys.executable, "-m", "sweeper.containment", json.dumps(args)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)       # a Ctrl-C or a killpg of the driver spares it
    return RayGuard(proc)


def guard_local_ray(session_dir: Optional[str]) -> RayGuard:
    """Call right after `ray.init()` started a LOCAL cluster, with its session folder (the Ray
    executor finds it: this module imports no Ray); `close()` after `ray.shutdown()`."""
    return guard_session(session_dir)


def _same(pid: int, created: float) -> Optional[psutil.Process]:
    try:
        proc = psutil.Process(pid)
        return proc if abs(proc.create_time() - created) < 0.01 else None
    except psutil.Error:
        return None


def _of_session(proc: psutil.Process, session_dir: str) -> bool:
    """Ray's daemons name the session folder on their command line; its workers and agents
    (retitled `ray::...`) keep their logs open in it."""
    inside = session_dir.rstrip(os.sep) + os.sep        # not a session whose name merely starts alike
    try:
        cmdline = proc.cmdline()
        if any(inside in arg or arg.endswith(session_dir) for arg in cmdline):
            return True
        if cmdline and cmdline[0].startswith("ray::"):
            return any(f.path.startswith(inside) for f in proc.open_files())
    except psutil.Error:
        pass
    return False


def session_processes(session_dir: Optional[str], known: Sequence[Sequence[float]]) -> List[psutil.Process]:
    """The processes of one Ray session still running, with everything below them."""
    me = os.getpid()
    found = {p.pid: p for p in (_same(int(pid), created) for pid, created in known) if p is not None}
    if session_dir:
        for proc in psutil.process_iter():
            if proc.pid != me and proc.pid not in found and _of_session(proc, session_dir):
                found[proc.pid] = proc
    for proc in list(found.values()):
        try:
            found.update({c.pid: c for c in proc.children(recursive=True) if c.pid != me})
        except psutil.Error:
            pass
    return [p for p in found.values() if p.pid != me and _running(p)]


def _running(proc: psutil.Process) -> bool:
    """Not a zombie: one already dead waits only for its parent to reap it."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_for_death(pid: int, created: float) -> None:
    """Returns when the driver has gone (a pidfd becomes readable; polling where there is none)."""
    import select

    if _same(pid, created) is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        while _same(pid, created) is not None:
            time.sleep(0.5)
        return
    if _same(pid, created) is not None:      # the pidfd is the driver's, not a reused pid's
        select.select([fd], [], [])
    os.close(fd)


def watchdog(args: dict) -> None:
    """Waits for the driver to die, then SIGKILLs its Ray session until nothing of it is left."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))   # RayGuard.close(): stand down
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _wait_for_death(*args["driver"])
    end = time.monotonic() + 30
    while time.monotonic() < end:
        left = session_processes(args["session_dir"], args["pids"])
        if not left:
            return
        _kill(left)
        time.sleep(0.2)


if __name__ == "__main__":
    watchdog(json.loads(sys.argv[1]))
