"""Checks of the machine a sweep starts on, before any trial and with dry_run too: the folders
it will write and what the plan asks of this node. Planning itself stays pure (sweeper/plan.py);
these read the file system and the CPU count, and write nothing.

Each problem is one line naming the key: an error (ConfigError, exit 2) when the run could not
do what it was asked, a warning on stderr when it can but the figures would mislead.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence

from sweeper.errors import ConfigError, NoRoom
from sweeper.faults import human_size, socket_path_line

if TYPE_CHECKING:                     # types only: the spare zygote's start (sweeper/nodezygote.py) imports this first
    from sweeper.plan import ClusterShape, Trial
    from sweeper.schema import RootConfig


def check_machine(root: RootConfig, trials: Sequence[Trial], shape: ClusterShape) -> None:
    """Every check of this machine; raises the first error, prints the warnings."""
    check_history_dir(root)
    check_wandb_timeout(root)
    check_temp_room(root.executor, root.ray.address)
    if root.executor != "local":
        check_node_ip(root.ray.node_ip_address)   # also before Ray's early start (executors.begin_early)
    refused = in_process_line(trials) if root.executor == "local" else None
    if refused:
        raise ConfigError(refused)
    if root.executor == "local" or not root.ray.address:      # the trials run on this machine
        check_shard_cache(trials)                             # a cluster's workers keep their own
        line = loader_workers_line(trials, shape)
        if line:
            print(f"warning: {line}", file=sys.stderr)


def in_process_line(trials: Sequence[Trial]) -> Optional[str]:
    """executor=local runs every trial in this one process: a trial's cap on its address space
    (RLIMIT_AS, never lifted) would cap sweeper itself for the rest of the run, and DeepSpeed keeps
    its process group (its comm backend's) from one trial to the next: each DeepSpeed trial after
    the first failed with "Group ... is not registered"."""
    if any(t.config.resources.memory_limit_gb for t in trials):
        return ("resources.memory_limit_gb: caps a trial's own process, and executor=local runs the trials in "
                "this one, so it would cap sweeper itself; leave executor out (each trial then runs in a process "
                "of its own), or leave the limit out")
    deepspeed = [t for t in trials if t.config.train is not None and t.config.train.backend == "deepspeed"]
    if len(deepspeed) < 2:
        return None
    return (f"executor=local: {len(deepspeed)} trials with train.backend=deepspeed would run in this one process, "
            f"and DeepSpeed keeps its process group from one trial to the next (each after the first would fail); "
            f"leave executor out (each trial then runs in a process of its own), or run one DeepSpeed trial")


def check_node_ip(address: Optional[str]) -> None:
    """ray.node_ip_address names this host to Ray: an address of another machine (or none of this
    one's) left Ray retrying its connection for minutes, past Ctrl-C. Binding a socket to it
    says at once whether it is this machine's."""
    if address is None:
        return
    import socket

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError as exc:
        raise ConfigError(f"ray.node_ip_address: {address} is not an address of this machine ({exc.strerror}); "
                          f"give one of its own (`hostname -I` lists them), or leave it out") from None


def folder_problem(path: Path) -> Optional[str]:
    """Why `path` cannot be (or become) a folder this user writes, or None. Leaves nothing: the
    nearest existing folder gets a probe folder, removed at once, since permissions do not say
    it for root or a read-only mount (/proc)."""
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a folder"
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} (above {path}) is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written by this user"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".sweeper-probe-", dir=existing))
    except OSError as exc:
        return f"cannot create a folder in {existing} ({exc.strerror})"
    return None


def check_history_dir(root: RootConfig) -> None:
    """The history store (history.dir, or its default under results_dir) and a wandb.dir the user
    gave can take what the run writes there: found now, not after the trials, when the run's
    history or W&B runs could only be lost. (W&B's default lies inside the run folder, which the
    run folder's own check covers.)"""
    from sweeper.storepath import history_dir

    store = history_dir({"history": {"dir": root.history.dir}, "results_dir": root.results_dir})
    for key, enabled, folder in (("history", root.history.enabled, store),
                                 ("wandb", root.wandb.enabled and root.wandb.mode != "disabled", root.wandb.dir)):
        problem = folder_problem(Path(folder).expanduser()) if enabled and folder else None
        if problem:
            raise ConfigError(f"{key}.dir: {problem}; set {key}.dir= to a folder you can write, "
                              f"or {key}.enabled=false")


def check_wandb_timeout(root: RootConfig) -> None:
    """WANDB_INIT_TIMEOUT, where W&B is on: the sink's rule, asked before the trials."""
    if root.wandb.enabled and root.wandb.mode != "disabled":
        from sweeper.publishers.wandb_sink import online_init_timeout_s

        online_init_timeout_s()


def check_shard_cache(trials: Sequence[Trial]) -> None:
    """data.cache_dir (SWEEPER_CACHE), where synthetic shards and shard checks are kept: a file or
    an unwritable folder there failed every trial, each with the same traceback."""
    for folder in sorted({t.config.data.cache_dir for t in trials if t.config.data is not None}):
        problem = folder_problem(Path(folder).expanduser())
        if problem:
            raise ConfigError(f"data.cache_dir: {problem}; set data.cache_dir= (or SWEEPER_CACHE) to a folder you "
                              f"can write")


MIN_TEMP_FREE = 64 * 2 ** 20     # bytes: a local Ray's session (its logs, sockets) and the trials' scratch


def temp_folders(executor: str, ray_address: Optional[str]) -> List[str]:
    """The folders a run writes outside its run folder on this machine: the trials' scratch
    (TMPDIR), and a local Ray's sessions (RAY_TMPDIR, else TMPDIR, else /tmp: Ray's own rule)."""
    folders = [tempfile.gettempdir()]
    if executor == "ray" and not ray_address:
        folders.append(ray_temp_folder()[1])
    return list(dict.fromkeys(folders))


def ray_temp_folder() -> tuple:
    """(the variable that names it, the folder) where a local Ray makes its sessions: Ray's own
    rule (ray._common.utils.get_default_system_temp_dir), a variable set but empty included."""
    for variable in ("RAY_TMPDIR", "TMPDIR"):
        if variable in os.environ:
            return variable, os.environ[variable]
    return "TMPDIR", "/tmp"


AF_UNIX_MAX = 107        # bytes of a socket's path (sun_path, less its NUL)
RAY_SOCKET_TAIL = "/ray/session_2026-12-03_14-18-16_069064_4194304/sockets/plasma_store"   # a pid of 7 digits


def check_ray_temp_writable(executor: str, ray_address: Optional[str]) -> None:
    """RAY_TMPDIR, else TMPDIR, where a local Ray makes its sessions: a folder this user can write."""
    if executor != "ray" or ray_address:
        return
    variable, folder = ray_temp_folder()
    problem = folder_problem(Path(folder)) if os.path.isabs(folder) else None   # relative: check_socket_room
    if problem:
        raise ConfigError(f"{variable}={folder}: {problem}; a local Ray makes its sessions there: point {variable} "
                          f"at a folder you can write")


def check_socket_room(executor: str, ray_address: Optional[str]) -> None:
    """A temp folder too deep for a local Ray's sockets (Ray's rule: RAY_TMPDIR, else TMPDIR, else
    /tmp): ConfigError now, where Ray would fail once it had made its session folders there. (The
    node zygote's socket under TMPDIR needs no check: without it, each worker has a zygote of its own.)"""
    if executor != "ray" or ray_address:
        return
    variable, folder = ray_temp_folder()
    if not os.path.isabs(folder):               # Ray's raylet aborts on one (SIGABRT, "Invalid argument")
        raise ConfigError(f"{variable}={folder}: a local Ray needs an absolute path; give {variable}="
                          f"{os.path.abspath(os.path.expanduser(folder or '.'))}")
    if len(os.fsencode(folder + RAY_SOCKET_TAIL)) > AF_UNIX_MAX:
        raise ConfigError(socket_path_line(variable))


def check_temp_room(executor: str, ray_address: Optional[str]) -> None:
    """A temp folder without room fails later and obscurely: a local Ray's node times out
    starting (after 30 s), a trial cannot make its scratch folder. Said now, in one line (also
    before a local Ray is started early: sweeper.executors.begin_early); so is one too deep for
    a local Ray's sockets (said after the room: a disk that is full is the first thing to mend).
    A local Ray's folder that cannot be written comes first: its disk's free space says nothing
    (/proc reads 0 B), and Ray, unlike Python's tempfile, takes no other."""
    check_ray_temp_writable(executor, ray_address)
    for folder in temp_folders(executor, ray_address):
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue                      # a folder that cannot be read fails with its own line later
        if free < MIN_TEMP_FREE:
            raise NoRoom(f"{folder}: {human_size(free)} free; a sweep needs {human_size(MIN_TEMP_FREE)} there "
                         f"(its trials' scratch folders, a local Ray's session): free space, or point TMPDIR "
                         f"(RAY_TMPDIR for Ray alone) at another disk")
    check_socket_room(executor, ray_address)


def loader_workers_line(trials: Sequence[Trial], shape: ClusterShape) -> Optional[str]:
    """One line when a trial's loader asks for more worker processes than the largest node has
    CPUs: it runs, but its workers share cores, so it measures contention."""
    cpus = max(shape.node_cpus, default=0.0)
    over: List[int] = sorted({t.config.data.num_workers for t in trials
                              if t.config.data is not None and t.config.data.num_workers > cpus})
    if not over or cpus <= 0:
        return None
    values = ",".join(str(n) for n in over)
    return (f"data.num_workers={values}: more loader workers than this node's {cpus:g} CPUs; they will share "
            f"cores and measure contention (use at most {cpus:g} here, or run on a larger node)")
