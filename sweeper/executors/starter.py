"""The thread a local Ray is started from (or a cluster attached to), while the driver composes
and plans: Ray's start overlaps the driver's own work, and the driver waits on it only when it
needs the cluster (sweeper/executors/ray_executor.py). `lean_local_start`: what a local Ray the
driver starts for itself leaves out of its start."""
from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import threading
import time
from typing import Iterator, Optional


class Starter:
    """Runs `connect` in a thread of its own (from `start`) that stays until `release`: Linux ends
    Ray's processes when the thread that started them ends."""

    def __init__(self, connect) -> None:
        self.connect, self.error = connect, None
        self.done, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name="ray-start", daemon=True)

    def start(self) -> "Starter":
        """Starts the thread; call it once the starter is where `close` finds it, so that a stop
        between the two cannot leave a start running that nothing waits on."""
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            _quiet_thread_warning()
            self.connect()
        except BaseException as exc:             # handed to the caller of `wait`
            self.error = exc
        finally:
            self.done.set()
        self.released.wait()

    def wait(self, timeout_s: Optional[float] = None) -> bool:
        """Until Ray is up (True) or `timeout_s` has passed (False); raises what its start raised."""
        if not self.finished(timeout_s):
            return False
        if self.error is not None:
            raise self.error
        return True

    def finished(self, timeout_s: Optional[float] = None) -> bool:
        if self.thread.ident is None:    # never started (a stop before `start`, no thread to be had)
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.done.wait(0.5):   # timed: Ctrl-C and SIGTERM still reach this thread
            if deadline is not None and time.monotonic() > deadline:
                return False
        return True

    def release(self) -> None:
        self.released.set()


class _NotFromThisThread(logging.Filter):
    """Ray warns that it set no SIGTERM handler outside the main thread: the driver has its own
    (sweeper/interrupts.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


def _quiet_thread_warning() -> None:
    logger = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NotFromThisThread) for f in logger.filters):
        logger.addFilter(_NotFromThisThread())


# The raylet connects to its own object store as it starts, which a thread of its own opens: where
# that is not listening yet, Ray waits its whole retry interval (1 s) before the next try, and the
# node registers a second later (in 2 of 4 sweeps here). The same 10 s in all, tried every 20 ms.
FAST_CONNECT = {"raylet_client_connect_timeout_milliseconds": 20, "raylet_client_num_connect_attempts": 500}
PRESTART_FLAG = "--num_prestart_python_workers="    # the raylet's: Ray sets it to the node's CPUs
AGENT_PORTS = {"--dashboard_agent_command=": "metrics_agent_port,metrics_export_port,dashboard_agent_listen_port",
               "--runtime_env_agent_command=": "runtime_env_agent_port"}     # the raylet's flag: the ports it waits for
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_standin.py")


@contextlib.contextmanager
def lean_local_start(one_worker: bool = True) -> Iterator[bool]:
    """A local Ray started without its API server, with one Python worker started by the node
    itself and stand-ins for the raylet's two Python agents; yields whether the raylet's command is
    rewritten so (`enable_worker_prestart` for ray.init). All on the critical path of every sweep
    (docs/performance.md "Start-up"):

    - With include_dashboard=False Ray 2.x still starts the API server (a Python process, for its
      usage statistics) and waits until it has published its address before it starts the
      raylet. The driver reads nothing from it: no dashboard, job or state API.
    - The first trial otherwise waits for a Ray worker process started only when it is submitted
      (1.2-1.7 s on an H200 host). Ray's own prestart starts one per CPU with the node, whose start
      they then slow; one is what a first trial needs.
    - The raylet registers its node only once its dashboard and runtime-env agents have written
      their ports, and each first imports Ray, aiohttp and OpenTelemetry: 0.6-2.7 s here. They
      serve metrics, the dashboard's and job API's calls, logs and runtime_envs; the driver uses none
      (`agent_standin.py`). Ray's check for the dashboard's packages, which only decides that
      agent's command line, is skipped with it (it imported them into the driver: 0.4-0.7 s).
    - Ray looks for the registered node once a second (`_registered_soon`), and the raylet for its
      object store too (`FAST_CONNECT`, given by the caller as Ray's system config).
    - Two more Python processes, each importing Ray while the node starts: the log monitor, which
      sends the workers' output to a driver that asks for none (log_to_driver=False), and the
      autoscaler's monitor, with nothing to scale on one node (Ray's own switches for both).

    Only the start made here goes so; a Ray whose raylet command is not built as expected is
    left as it is. `one_worker=False` (a job's runtime_env): its tasks need Ray's runtime-env
    agent and could not use that worker, so it keeps Ray's agents and the flag as they are."""
    from ray._private import node, services, utils

    rewrite = one_worker and _has_raylet_flags(services)
    patches = [(node.Node, "start_api_server", lambda *_, **__: None),
               (node.Node, "start_head_processes", _without_monitors(getattr(node.Node, "start_head_processes", None))),
               (node.Node, "start_ray_processes", _registered_soon(getattr(node.Node, "start_ray_processes", None)))]
    if rewrite:
        patches += [(services, "start_ray_process", _lean_raylet(services.start_ray_process)),
                    (utils, "get_dashboard_dependency_error", lambda: None)]
    with _replaced(patches):
        yield rewrite


@contextlib.contextmanager
def _replaced(patches) -> Iterator[None]:
    """Each (owner, name, new) that the owner has, replaced for the block, then restored."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches if hasattr(owner, name)]
    for owner, name, new in patches:
        if hasattr(owner, name):
            setattr(owner, name, new)
    try:
        yield
    finally:
        for owner, name, old in saved:
            setattr(owner, name, old)


def _has_raylet_flags(services) -> bool:
    """Whether this Ray builds the raylet's command with the flags `_lean_raylet` rewrites."""
    code = getattr(getattr(services, "start_raylet", None), "__code__", None)
    flags = [PRESTART_FLAG, *AGENT_PORTS]
    return code is not None and all(f"{flag}{{}}" in code.co_consts for flag in flags)


def _lean_raylet(start_process):
    """Ray's start_ray_process, starting the raylet with one prestarted Python worker (the flag
    says one per CPU) and the agents' stand-ins."""
    def start(command, process_type, *args, **kwargs):
        if process_type == "raylet":
            command = [_lean_part(part) for part in command]
        return start_process(command, process_type, *args, **kwargs)

    return start


def _lean_part(part: str) -> str:
    if part.startswith(PRESTART_FLAG):
        return f"{PRESTART_FLAG}1"
    flag = next((flag for flag in AGENT_PORTS if part.startswith(flag)), None)
    return part if flag is None else flag + _standin(part[len(flag):], AGENT_PORTS[flag])


def _standin(agent_command: str, ports: str) -> str:
    """The stand-in's command line, with the agent's session folder and node id (Ray builds it
    with list2cmdline, as here; the watchdog finds the stand-in by that folder)."""
    kept = [arg for arg in shlex.split(agent_command) if arg.startswith(("--session-dir=", "--node-id="))]
    return subprocess.list2cmdline([sys.executable, "-S", STANDIN, ports, *kept])


def _without_monitors(start_head_processes):
    """Node.start_head_processes with Ray's switches for its log monitor and autoscaler monitor off."""
    if start_head_processes is None:
        return None

    def start(node) -> None:
        node._ray_params.no_monitor, node._ray_params.include_log_monitor = True, False
        start_head_processes(node)

    return start


def _registered_soon(start_processes):
    """Node.start_ray_processes, returning once the raylet has registered with the GCS: Ray looks
    for it 0.1 s after the raylet's start and then once a second, a second lost where the first look
    is too early."""
    if start_processes is None:
        return None

    def start(node) -> None:
        start_processes(node)
        _wait_registered(node)

    return start


def _wait_registered(node, timeout_s: float = 10.0) -> None:
    """Every 20 ms; gives up (Ray's own wait follows, with its error) when the raylet has exited,
    which is left unreaped for the driver's account of it (nodewatch.died_starting)."""
    import psutil

    try:
        gcs, raylet = node.get_gcs_client(), psutil.Process(node.all_processes["raylet"][0].process.pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and raylet.status() != psutil.STATUS_ZOMBIE:
            if any(found.hex() == node._node_id for found in gcs.get_all_node_info(timeout=1)):
                return
            time.sleep(0.02)
    except Exception:                              # noqa: BLE001 - Ray's own wait says what is wrong
        return
