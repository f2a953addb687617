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

The local Ray cluster is the other escape: sweeper/rayguard.py watches it.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
import traceback
from typing import Callable, Dict, Iterable, List, NoReturn, Optional, Sequence, Set

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
KILL_DEADLINE_S = 10.0       # a process stuck in the kernel (D state) cannot die; don't wait for it for ever
CGROUP_ROOT = "/sys/fs/cgroup"


def _prctl(option: int, value: int) -> bool:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except OSError:
        return False


def set_child_subreaper(on: bool = True) -> bool:
    """Orphans below this process come back to it instead of init, so it can still end them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, int(on))


def is_child_subreaper() -> bool:
    flag = ctypes.c_int(0)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 1
    except OSError:
        return False


def set_death_signal(sig: int) -> bool:
    """Linux sends `sig` to this process when its parent dies."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def die_with(parent: int, sig: int) -> bool:
    """Asks for `sig` when this process's parent dies; False when `parent` (its pid) has already
    gone: it died before the ask took hold, and no signal will come."""
    set_death_signal(sig)
    return os.getppid() == parent


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


def kill_procs(procs: Iterable[psutil.Process]) -> None:
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
        kill_procs(left)
        time.sleep(0.01)         # let the kills land and the orphans re-parent here


def running(proc: psutil.Process) -> bool:
    """Not a zombie: one already dead waits only for its parent to reap it."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(proc: psutil.Process) -> List[psutil.Process]:
    """A process and everything below it, listed now (before any of them is ended)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def kill_tree(proc: psutil.Process) -> None:
    """SIGKILLs a process and everything below it, listed before any of them dies."""
    kill_procs(_tree(proc))


def process_trees(pids: Sequence[int]) -> List[psutil.Process]:
    """These processes and everything below them, listed now (before any of them is ended)."""
    found: Dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            continue
        found.update({p.pid: p for p in _tree(root)})
    return list(found.values())


def end_processes(procs: Sequence[psutil.Process], deadline_s: float = 10.0) -> List[psutil.Process]:
    """SIGKILLs them, then returns once each has exited (gone, or a zombie that holds nothing but
    its pid): milliseconds. Returns those still running at the deadline (stuck in the kernel)."""
    kill_procs(procs)
    end = time.monotonic() + deadline_s
    left = [p for p in procs if running(p)]
    while left and time.monotonic() < end:
        time.sleep(0.005)
        left = [p for p in left if running(p)]
    return left


def descendants() -> Set[int]:
    """The pids of every process below this one."""
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def end_new_descendants(before: Set[int], deadline_s: float = KILL_DEADLINE_S) -> List[int]:
    """SIGKILLs every process below this one that is not in `before`, again until none is left,
    and reaps those that are its children; returns their pids. With set_child_subreaper() a
    daemon that double-forked away (fork, setsid, fork) comes back below this process first."""
    ended: List[int] = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        except psutil.Error:
            new = []
        if not any(running(p) for p in new):
            _reap(p.pid for p in new)
            return ended
        kill_procs(new)
        ended += [p.pid for p in new if p.pid not in ended]
        _reap(p.pid for p in new)
        time.sleep(0.01)
    return ended


def _reap(pids: Iterable[int]) -> None:
    """Collects the given children that have ended; never another's (a waitpid(-1) would take a
    child that a subprocess.Popen elsewhere in this process still waits for)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


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


def keep(trial: Callable[[], None], after: Optional[Callable[[], None]] = None,
         forked: Optional[Callable[[], None]] = None) -> NoReturn:
    """Runs in the process that will stand for the trial (the zygote's fork): become a subreaper,
    fork the real trial, (call `forked`,) wait for it, then end every process below, whichever way
    it ended, then call `after`. Never returns: an error here must not carry the fork back into the
    caller's code."""
    try:
        code = _keep(trial, forked)
    except BaseException:
        traceback.print_exc()
        kill_descendants()
        code = 70
    try:
        if after is not None:
            after()
    except BaseException:
        traceback.print_exc()
    _exit_like(code)


def _keep(trial: Callable[[], None], forked: Optional[Callable[[], None]] = None) -> int:
    set_child_subreaper()
    group = TrialCgroup.create()
    # blocked before the fork, so neither signal is lost; waited for with sigtimedwait below
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD, signal.SIGTERM])
    keeper = os.getpid()
    pid = os.fork()
    if pid == 0:
        _trial_process(trial, keeper, group)
    if forked is not None:
        forked()
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
