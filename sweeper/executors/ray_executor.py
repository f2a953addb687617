"""The Ray executor: the only module that imports Ray.

Starts a local Ray (or attaches to `ray.address`), asks it for the cluster's shape,
submits each trial as a task with its CPU and GPU requests (Ray's scheduler places it),
and hands back outcomes as tasks end (`ray.wait`). Inside the task, the trial is forked
from a warm zygote into a contained process tree of its own (sweeper/isolation.py).

Ray starts in the background (`begin`, called as soon as the launcher knows the sweep runs
on Ray, imports Ray in the caller's thread and then starts it), while the other jobs are composed
and all are planned; `start` waits for it. `ray.init` runs in a
thread that lives as long as the executor: Ray's processes die with the thread that started
them (PR_SET_PDEATHSIG), so that thread ends only once they are gone. A local Ray this driver
started is ended at once by `close` (SIGKILL to its process tree; the records are written by
then), not by Ray's graceful shutdown, which held the prompt for seconds. Its raylet and GCS server
are watched (sweeper/executors/nodewatch.py): `node_lost` says at once when they are gone.
"""
from __future__ import annotations

import logging
import math
import os
import secrets
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sweeper.executors import attached
from sweeper.executors.attached import attach
from sweeper.executors.base import Executor, NodeLost, TrialLost
from sweeper.nodezygote import NodeZygote, adopt, end_spare
from sweeper.executors.starter import FAST_CONNECT, Starter, lean_local_start
from sweeper.isolation import Outcome
from sweeper.plan import ClusterShape, Trial
from sweeper.timeline import mark

START_WAIT_S = 30.0     # a stop during Ray's start waits for it this long: then every process it started is known


def ray_session_dir() -> Optional[str]:
    """The session folder of the Ray this process started (Ray 2.60: the global node's)."""
    try:
        from ray._private import worker

        node = getattr(worker, "_global_node", None) or worker.global_worker.node
        return node.get_session_dir_path()
    except Exception:
        return None


def _run_on_worker(spec: Dict[str, Any], timeout_s: float, node_zygote: Optional[str]) -> Outcome:
    """Runs inside a Ray worker: fork the trial from the node's zygote, or this worker's own."""
    from sweeper.isolation import shared_host

    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "") if spec["num_gpus"] > 0 else ""
    outcome = shared_host(node_zygote, spec.get("preload", ())).run(spec, timeout_s, {"CUDA_VISIBLE_DEVICES": gpus})
    outcome.record.worker_pid = os.getpid()
    outcome.record.fingerprint["ray_node_id"] = _node_id()    # the fleet keys results by node (and GPU UUID)
    return outcome


def _node_id() -> Optional[str]:
    import ray

    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:
        return None


def _own_token() -> Tuple[str, ...]:
    """A local Ray this driver starts keeps Ray's token authentication, with a token of this run's
    own in the environment (its name marks it a credential: records redact it). Ray then neither
    warns on stderr about its default nor saves a token under ~/.ray. A mode the user set stays.
    Returns the variables it set, which `_drop_own_token` takes out again."""
    if "RAY_AUTH_MODE" in os.environ:
        return ()
    set_here = ("RAY_AUTH_MODE",) + (() if "RAY_AUTH_TOKEN" in os.environ else ("RAY_AUTH_TOKEN",))
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    _reread_ray_auth()
    return set_here


def _drop_own_token(set_here: Sequence[str]) -> None:
    """Once the local Ray that `_own_token` was for has ended: the process that ran the sweep (a
    notebook, a test) is left as it was, so that its next Ray, or a cluster without tokens it
    attaches to, is not sent this run's mode and token."""
    for name in set_here:
        os.environ.pop(name, None)
    _reread_ray_auth()


def _reread_ray_auth() -> None:
    """Ray reads its auth mode and token from the environment once; as Ray does when it turns
    token mode on itself, it is made to read them again."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def checked_runtime_env(ray, runtime_env: Dict[str, Any]) -> Dict[str, Any]:
    """ray.runtime_env as Ray's own validator reads it: what it refuses is one line naming the key,
    not the TypeError ray.init raises from deep inside (read as a bug in sweeper)."""
    from sweeper.errors import ConfigError

    try:
        ray.runtime_env.RuntimeEnv(**runtime_env)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"ray.runtime_env: {exc}; give what Ray's runtime_env takes (env_vars values are "
                          f"strings: quote them, '+ray.runtime_env={{env_vars:{{A:\"1\"}}}}')") from None
    return runtime_env


class RayExecutor(Executor):
    closes_beside_the_end = True       # Ray's processes and its zygote, by their own ids

    def __init__(self, ray_cfg, preload: Sequence[str]) -> None:
        self.cfg, self.preload = ray_cfg, list(preload)
        self.started_ray = False
        self.own_token: Tuple[str, ...] = ()    # what _own_token set in the environment, for this Ray
        self.zygote: Optional[NodeZygote] = None
        self.guard = None
        self.session: Optional[str] = None    # a local Ray's session folder (its logs), removed at the end
        self.lost = False                      # unless Ray lost a trial: then its logs say why
        self.remote = None
        self.starter: Optional[Starter] = None
        self.watch = None                      # a local Ray's raylet and GCS server (nodewatch.NodeWatch)
        self.submitted: Dict[str, Optional[str]] = {}    # trial id -> the driver's scratch folder it was given

    # -- the cluster ------------------------------------------------------------------
    def begin(self) -> None:
        """Starts the node zygote (its torch import), imports Ray (here: below) and starts it in the
        background; `start` waits."""
        if self.starter is not None:
            return
        if not self.cfg.address and not self.cfg.runtime_env:
            self.zygote = adopt(self.preload)       # the command's spare, or one from this thread (it dies with it)
        else:
            end_spare()                             # no local Ray's workers to fork for
        # Imported before Ray's thread forks its processes: this module registers fork hooks (a lock
        # taken before each fork, released after), and registered by an import in this thread
        # between another thread's fork and its hooks, the release of a lock never taken printed
        # "Exception ignored ... RuntimeError: release unlocked lock" on the user's stderr.
        import concurrent.futures.thread  # noqa: F401
        # Ray is imported here, before the driver's own imports that follow (pandas, pyarrow, the
        # analysis: `driver.warm_imports`): Python runs one thread at a time, and imported in Ray's
        # thread beside them, Ray's import took 0.7 s where alone it takes 0.3 s (2 cores here) and
        # 2 s where alone 1.1 s (an H200 host), all on Ray's way up.
        import ray

        mark("ray_imported")
        # Every outcome the sweep wants it fetches; what Ray would log as an "unhandled error" is a
        # trial the sweep itself cancelled on a stop, a line after the stop's own (read when logged).
        os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
        if not self.cfg.address and not ray.is_initialized():     # a local Ray of this run's own
            # Set here, before Ray's thread: set there, beside this thread's imports, the environment
            # could be reallocated under a library's getenv (glibc's setenv is not thread-safe). A stop
            # waits: what was set is then known to `close`, which takes it out.
            from sweeper.interrupts import deferred

            with deferred():
                self.own_token = _own_token()
        self.starter = Starter(self._connect_and_guard)
        self.starter.start()

    def add_preload(self, modules: Sequence[str]) -> None:
        """The workloads' modules, known once the jobs are composed, for a zygote begun before."""
        more = [m for m in modules if m not in self.preload]
        self.preload += more
        if self.zygote is not None and more:
            self.zygote.preload(more)

    def start(self) -> ClusterShape:
        self.begin()
        if not self.starter.wait(attached.WAIT_S if self.cfg.address else None):   # re-raises what ray.init raised
            raise attached.not_taken(self.cfg.address)
        return self._shape()

    def _connect_and_guard(self) -> None:
        self.started_ray = self._connect()
        mark("ray_ready")
        if self.started_ray:
            from sweeper.executors.nodewatch import NodeWatch, vital_processes
            from sweeper.rayguard import guard_local_ray

            self.session = ray_session_dir()
            self.guard = guard_local_ray(self.session)        # Ray's processes end with this driver, even on SIGKILL
            self.watch = NodeWatch(vital_processes(), self._hosted)

    def _connect(self) -> bool:
        """Starts a local Ray (returns True) or attaches to `ray.address`."""
        import ray

        if ray.is_initialized():
            return False
        kwargs: Dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                  "log_to_driver": False}
        if self.cfg.runtime_env:
            kwargs["runtime_env"] = checked_runtime_env(ray, dict(self.cfg.runtime_env))
        if self.cfg.node_ip_address:
            kwargs["_node_ip_address"] = self.cfg.node_ip_address
        if self.cfg.address:
            attach(ray, self.cfg.address, kwargs)
            return False
        # No worker per CPU at the first driver's connection: on a 16-core host that is 16 Python
        # processes importing Ray while the first trials are measured. Trials get theirs on demand.
        self.started_ray = True     # before init: a start that raises midway still has what it started ended
        from sweeper.executors.nodewatch import quiet_node_death, raise_if_node_died

        lean = lean_local_start(one_worker=not self.cfg.runtime_env)     # a job's runtime_env: Ray's own agents
        with lean as prestart, quiet_node_death():        # the node's death is the driver's one line, not Ray's 44
            try:
                ray.init(address="local", num_cpus=self.cfg.num_cpus, num_gpus=self.cfg.num_gpus,   # ours, not a cluster here
                         _system_config={"prestart_worker_first_driver": False, "enable_worker_prestart": prestart,
                                         **FAST_CONNECT},
                         **kwargs)
            except Exception:
                raise_if_node_died()            # killed while Ray started (out of memory?): one line, not a bug's
                raise
        return True

    def _shape(self) -> ClusterShape:
        import ray

        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
        return ClusterShape(node_cpus=[n["Resources"].get("CPU", 0.0) for n in nodes],
                            node_gpus=[n["Resources"].get("GPU", 0.0) for n in nodes],
                            node_ids=[n["NodeID"] for n in nodes])

    def describe(self, shape: ClusterShape) -> str:
        where = f"Ray at {self.cfg.address}" if self.cfg.address else "a local Ray"
        return f"{where} ({super().describe(shape)})"

    # -- trials -----------------------------------------------------------------------
    def submit(self, trial: Trial, spec: Dict[str, Any]):
        import ray

        if self.remote is None:
            # max_calls=0 keeps the worker and its warm zygote even for GPU tasks: CUDA lives
            # only in each trial's own child process, so nothing of one trial stays behind.
            self.remote = ray.remote(max_calls=0)(_run_on_worker)
        node_zygote = self.zygote.socket_path if self.zygote is not None and self.started_ray else None
        options: Dict[str, Any] = dict(num_cpus=trial.num_cpus, num_gpus=trial.num_gpus, max_retries=0,
                                       name=f"trial-{trial.trial_id}")
        if trial.node is not None:      # the fleet: this node and no other (soft=False: wait for it)
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=trial.node, soft=False)
        task = self.remote.options(**options)
        if node_zygote is not None and not self.submitted and trial.num_gpus > 0:
            self._first_standby(spec, trial.num_gpus)
        self.submitted[trial.trial_id] = spec.get("scratch_root")
        return task.remote(spec, trial.config.resources.timeout_s, node_zygote)

    def _first_standby(self, spec: Dict[str, Any], gpus: float) -> None:
        """The first GPU trial's standby, asked of the node's zygote as the trial is submitted, on the
        GPUs a local Ray gives a first task (the lowest of the node's); where it gives others, the
        standby waits for a later trial on those."""
        from sweeper.isolation import trial_request
        from sweeper.standby import visible_devices

        visible = visible_devices()
        first = (visible or [str(i) for i in range(64)])[:max(1, math.ceil(gpus))]
        request = trial_request(spec, None, {"CUDA_VISIBLE_DEVICES": ",".join(first)})
        if request.get("prestart"):
            self.zygote.standby(request)

    def _hosted(self):
        """The trials whose host runs on this machine now (each has its scratch folder)."""
        from sweeper.isolation import hosted_in

        submitted = dict(self.submitted)           # a copy: the driver's thread may submit meanwhile
        return frozenset().union(*(hosted_in(root, [t for t, r in submitted.items() if r == root])
                                   for root in set(submitted.values())))

    def node_lost(self) -> Optional[NodeLost]:
        if self.watch is None or self.watch.what is None:
            return None
        self.lost = True                               # its session folder stays: Ray's logs of the node
        return NodeLost(self.watch.what, self.session, self.watch.running)

    def wait(self, handles: Sequence[Any], timeout_s: float, all_ready: bool = False) -> List[Any]:
        import ray

        if not handles:
            return []
        wanted = len(handles) if all_ready else 1
        done, _ = ray.wait(list(handles), num_returns=wanted, timeout=timeout_s)
        return done

    def outcome(self, handle: Any) -> Outcome:
        import ray

        try:
            return ray.get(handle, timeout=30 if self.node_lost() is None else 2)   # not from a dead node's store
        except (ray.exceptions.RayError, TimeoutError) as exc:   # the worker or its node died
            self.lost = True
            raise TrialLost(type(exc).__name__, str(exc)[-2000:]) from None

    def cancel(self, handles: Sequence[Any]) -> None:
        """On a cluster we only attached to, force-cancel the tasks; a local Ray we started is
        shut down in `close` instead, and its trials with it (their hosts hang up). Plain
        ray.cancel raced with completing tasks and aborted the driver."""
        import ray

        if not self.started_ray:
            for handle in handles:
                ray.cancel(handle, force=True)

    def close(self) -> None:
        """Ends what this executor started. A start still under way is let finish first: only
        then is every process it started known (and Ray prints nothing of an aborted start)."""
        from sweeper.interrupts import deferred

        try:
            started = self._start_finished()          # a stop may cut this wait short, not what follows:
            with deferred():                          # a second Ctrl-C waits for the ending (milliseconds)
                self._end(started)
        finally:
            if self.zygote is not None:
                self.zygote.close()
            if self.starter is not None:
                self.starter.release()                   # Ray's processes end with that thread, if not before

    def _end(self, started: bool) -> None:
        if self.watch is not None:
            self.watch.close()                       # before Ray's processes are ended here
        ending = _disconnect_local_ray(self.session if self.node_lost() else None) \
            if self.started_ray and started else None
        if self.zygote is not None:      # only now: a trial it ends would be an error Ray prints
            self.zygote.kill()
        if ending is not None:
            _end_processes(*ending)
        if self.own_token and started and (ending is not None or not self.started_ray):  # its Ray ended, or none
            _drop_own_token(self.own_token)
            self.own_token = ()
        if self.guard is not None:
            self.guard.close()                       # only once Ray is gone; else it ends Ray when we do
        if ending is not None and self.session and not self.lost:
            from sweeper.rayguard import drop_session

            drop_session(self.session)               # Ray keeps every session's folder under /tmp/ray

    def _start_finished(self) -> bool:
        """Whether Ray's start is over, waiting for it a bounded time. A stop that broke an import
        of Ray's start thread (its module lock left held) once left that thread, and this wait,
        stuck for good; past the bound what it started ends with this process, its raylet and GCS
        by their death signal."""
        if self.starter is None or self.cfg.address:     # an attach starts nothing: not waited on
            return True
        if self.starter.finished(START_WAIT_S):
            return True
        print(f"warning: Ray's start had not finished {START_WAIT_S:g} s after the sweep stopped; "
              f"what it started ends with this process", file=sys.stderr, flush=True)
        return False


def _disconnect_local_ray(orphaned: Optional[str] = None):
    """Disconnects this driver from the local Ray it started; returns what `_end_processes`
    ends. Ray's own shutdown asks each process to end in turn and waits for it: seconds, with
    the prompt held. `orphaned`: the session folder of a node whose raylet died, whose workers
    and agents it had started are no longer below it."""
    import ray
    from ray._private import worker

    from sweeper.containment import process_trees
    from sweeper.rayguard import session_processes

    node = worker._global_node
    popens = [info.process for infos in (node.all_processes.values() if node else ()) for info in infos]
    tree = process_trees([p.pid for p in popens]) + (session_processes(orphaned, []) if orphaned else [])
    try:
        if node is not None and node.is_head():
            node.destroy_external_storage()      # spilled objects, if any
        worker._global_node = None               # so that ray.shutdown() only disconnects this driver
        ray.shutdown()
    finally:
        worker._global_node = None
    return tree, popens


def _end_processes(tree, popens) -> None:
    """SIGKILLs Ray's processes and everything below them, returning once each has exited
    (milliseconds)."""
    from sweeper.containment import end_processes

    end_processes(tree)
    for proc in popens:
        proc.poll()                              # reaped through their Popen, which waits for them
