"""Several ranks inside one trial: the trial process is rank 0 and starts the others.

Ray gives a trial of world size N its N GPUs (or N x CPUs) as one task on one
node; from there on the workload owns its ranks:

    rank 0 (the trial process)          ranks 1..N-1 (its children)
      start children ------------------>  wait for the port
      TCPStore on 127.0.0.1:<free port>
      send the port ------------------->  join the store
      init_process_group(gloo | nccl) <-> init_process_group
      rank_fn(cfg, probe, ctx)           rank_fn(cfg, NullProbe(), ctx)
      collect figures <------------------ send figures (or the error)
      reap every child, whatever happened

Children start with fork on CPU (cheap: torch is already imported, and no
OpenMP pool has run yet) and with spawn on CUDA (a forked child cannot use CUDA
once its parent has touched it). They die with rank 0 (PR_SET_PDEATHSIG), they
share its process group (so the host's timeout kill takes them too), and
`run_ranks` kills whatever is left when it returns or raises.

Imports neither Ray nor Hydra; only torch and the standard library.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
import torch.distributed as dist

START_METHODS = {"cpu": "fork", "cuda": "spawn"}
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
JOIN_TIMEOUT_S = 60.0        # a child that has sent its figures but not exited by then is killed
CAUSE_WAIT_S = 3.0           # when rank 0 fails, how long to wait for a child's report of the cause


@dataclass
class RankContext:
    rank: int
    world_size: int
    device: torch.device
    distributed: bool                                     # a process group is up
    figures: Dict[str, Any] = field(default_factory=dict)  # filled as the rank goes, kept if it fails


RankFn = Callable[[Any, Any, RankContext], None]        # (cfg, probe, ctx): fills ctx.figures


class NullProbe:
    """The probe API for ranks other than 0: their steps are timed by the workload itself."""

    @contextlib.contextmanager
    def step(self, items: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        yield {}

    def phase(self, name: str):
        return contextlib.nullcontext()

    def record(self, **values: Any) -> None:
        pass

    def set_figure(self, name: str, value: Any) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


class RankFailed(RuntimeError):
    def __init__(self, rank: int, error_type: str, message: str):
        super().__init__(f"rank {rank} failed with {error_type}: {message}")
        self.rank, self.error_type = rank, error_type


def rank_device(device_type: str, rank: int) -> torch.device:
    if device_type != "cuda":
        return torch.device("cpu")
    if torch.cuda.device_count() <= rank:
        raise RuntimeError(f"rank {rank} needs GPU {rank} but this trial sees {torch.cuda.device_count()}; "
                           f"train.world_size must not exceed the GPUs Ray gave the trial (resources.gpus)")
    torch.cuda.set_device(rank)
    return torch.device("cuda", rank)


def share_threads(world_size: int) -> int:
    """The trial's CPU threads, split between its ranks."""
    threads = max(1, torch.get_num_threads() // world_size)
    torch.set_num_threads(threads)
    return threads


# -- rank 0 -------------------------------------------------------------------------
def run_ranks(cfg, probe, rank_fn: RankFn) -> List[Dict[str, Any]]:
    """Runs rank_fn on train.world_size ranks; returns each rank's figures, rank 0 first."""
    device_type, world = cfg.workload.device, cfg.train.world_size
    threads = share_threads(world)
    probe.set_figure("threads_per_rank", threads)
    context = torch.multiprocessing.get_context(START_METHODS[device_type])
    children: List[Any] = []
    finished = False
    try:
        for rank in range(1, world):
            parent_end, child_end = context.Pipe()
            proc = context.Process(target=_child_main, name=f"rank-{rank}",
                                   args=(rank, cfg, rank_fn, child_end, os.getpid(), threads))
            proc.start()
            child_end.close()
            children.append((rank, proc, parent_end))
            if hasattr(probe, "exclude_process"):    # a rank is not a loader worker: keep it out of their memory
                probe.exclude_process(proc.pid)
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=cfg.train.dist_timeout_s))
        for _, _, pipe in children:
            pipe.send(store.port)
        watcher = _Watcher(children)
        ctx = RankContext(0, world, torch.device("cpu"), True)
        try:
            ctx.device = rank_device(device_type, 0)
            _run_rank(cfg, probe, rank_fn, ctx, store)
        except BaseException:
            # a child's failure is usually the cause of rank 0's
            _raise_child_error(watcher.wait(CAUSE_WAIT_S), probe, world, missing_ok=True)
            raise
        results = watcher.wait(cfg.train.dist_timeout_s)
        _raise_child_error(results, probe, world)
        finished = True
        return [ctx.figures] + [results[rank]["figures"] for rank, _, _ in children]
    finally:
        reap([proc for _, proc, _ in children], JOIN_TIMEOUT_S if finished else 1.0)


def _run_rank(cfg, probe, rank_fn: RankFn, ctx: RankContext, store) -> None:
    backend = BACKENDS[ctx.device.type]
    dist.init_process_group(backend, store=store, rank=ctx.rank, world_size=ctx.world_size,
                            timeout=datetime.timedelta(seconds=cfg.train.dist_timeout_s),
                            device_id=ctx.device if backend == "nccl" else None)
    rank_fn(cfg, probe, ctx)
    dist.destroy_process_group()   # only on success: after a failed collective it can hang


class _Watcher:
    """Collects the children's results on a thread of its own. When a child fails while
    rank 0 waits in a collective, it aborts rank 0's process group so that rank 0 fails
    too (gloo notices a dead peer by itself; NCCL would wait for dist_timeout_s)."""

    def __init__(self, children):
        self.children, self.results = children, {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._collect, name="rank-watcher", daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        from multiprocessing.connection import wait

        waiting = {pipe: rank for rank, _, pipe in self.children}
        while waiting:
            for pipe in wait(list(waiting)):
                rank = waiting.pop(pipe)
                try:
                    self.results[rank] = pipe.recv()
                except EOFError:   # died without a word: killed, or crashed in C
                    self.results[rank] = {"ok": False, "error_type": "RankDied", "figures": {},
                                          "error_message": "the rank process exited without sending its figures"}
                if not self.results[rank]["ok"]:
                    _abort_process_group()
        self.done.set()

    def wait(self, timeout_s: float) -> Dict[int, Dict[str, Any]]:
        self.done.wait(timeout_s)
        return dict(self.results)


def _abort_process_group() -> None:
    abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if abort is None or not dist.is_initialized() or dist.get_backend() != "nccl":
        return
    with contextlib.suppress(Exception):
        abort()


def _raise_child_error(results: Dict[int, Dict[str, Any]], probe, world: int, missing_ok: bool = False) -> None:
    """The first failed child's error, as an OutOfMemoryError when that is what it was.
    Whatever figures the failed rank had (its peak memory) go into the trial's figures."""
    for rank in range(1, world):
        if missing_ok and rank not in results:    # still waiting in a collective: not the cause
            continue
        result = results.get(rank) or {"ok": False, "error_type": "RankTimeout", "figures": {},
                                       "error_message": "sent nothing within train.dist_timeout_s"}
        if not result["ok"]:
            for name, value in result["figures"].items():
                probe.set_figure(f"rank{rank}_{name}", value)
            if result["error_type"] == "OutOfMemoryError":
                raise torch.OutOfMemoryError(f"rank {rank}: {result['error_message']}")
            raise RankFailed(rank, result["error_type"], result["error_message"])


def reap(procs, grace_s: float) -> None:
    """Every child ends here: joined if it exits within grace_s, killed if not."""
    for proc in procs:
        proc.join(timeout=grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10)


# -- ranks 1..N-1 -------------------------------------------------------------------
def die_with_parent(parent_pid: int) -> None:
    from sweeper.containment import die_with

    if not die_with(parent_pid, signal.SIGKILL):      # the parent died before the ask took hold
        os._exit(1)


def _child_main(rank: int, cfg, rank_fn: RankFn, pipe, parent_pid: int, threads: int) -> None:
    die_with_parent(parent_pid)
    torch.set_num_threads(threads)
    ctx = RankContext(rank, cfg.train.world_size, torch.device("cpu"), True)
    try:
        ctx.device = rank_device(cfg.workload.device, rank)
        if not pipe.poll(cfg.train.dist_timeout_s):
            raise TimeoutError("rank 0 never sent the rendezvous port")
        store = dist.TCPStore("127.0.0.1", pipe.recv(), cfg.train.world_size, is_master=False,
                              timeout=datetime.timedelta(seconds=cfg.train.dist_timeout_s))
        _run_rank(cfg, NullProbe(), rank_fn, ctx, store)
        pipe.send({"ok": True, "figures": ctx.figures})
    except BaseException as exc:
        traceback.print_exc()
        sys.stderr.flush()
        with contextlib.suppress(Exception):
            pipe.send({"ok": False, "error_type": type(exc).__name__, "error_message": str(exc)[-2000:],
                       "figures": ctx.figures})
        os._exit(1)
