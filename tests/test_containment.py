"""Nothing a trial starts outlives it: a child in a new session and a double-forked daemon,
both ignoring SIGTERM, are gone after a normal end, a failure, a timeout, a cancel, a host
that hangs up, a keeper or a zygote killed; a SIGKILLed driver leaves no local Ray behind.
Real processes throughout, checked in the process table; each test ends what it started by pid."""
import json
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.conftest import ROOT, name_of
from tests.test_isolation import spec_for

pytestmark = pytest.mark.slow      # real processes throughout

ESCAPEES = "tests.workloads_for_tests:starts_escapees"


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def processes(pids):
    """psutil handles taken now, so a later kill cannot hit a reused pid."""
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return found


def read_pids(pid_file, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the workload never wrote its pids"
        time.sleep(0.02)
    return [int(p) for p in pid_file.read_text().split()]


def left_after(procs, within_s=5.0):
    """Those of `procs` still running after `within_s` (at once when none is)."""
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p.pid for p in procs if alive(p)]


def end(procs):
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def status_of(outcome):
    record = outcome.record
    return record.to_dict() if hasattr(record, "to_dict") else record




# -- through TrialHost ---------------------------------------------------------------
@pytest.mark.parametrize("then,status", [("return", "ok"), ("raise", "failed")])
def test_escapees_are_gone_when_the_trial_ends(host, tmp_path, then, status):
    pid_file = tmp_path / "pids"
    procs = []
    try:
        record = status_of(host.run(spec_for(ESCAPEES, pid_file=str(pid_file), then=then), 60, {}))
        procs = processes(read_pids(pid_file, timeout_s=0))
        assert record["status"] == status, record
        assert left_after(procs) == []
    finally:
        end(procs)


def test_escapees_are_gone_after_a_timeout(host, tmp_path):
    pid_file = tmp_path / "pids"
    procs = []
    try:
        started = time.monotonic()
        record = status_of(host.run(spec_for(ESCAPEES, timeout_s=8.0, pid_file=str(pid_file), then="hang"),
                                    8.0, {}))
        procs = processes(read_pids(pid_file, timeout_s=0))
        assert record["status"] == "timeout" and record["error_type"] == "TrialTimeout"
        assert time.monotonic() - started < 30              # the keeper ended it; no backstop wait
        assert left_after(procs) == [] and left_after(processes([record["pid"]])) == []
    finally:
        end(procs)


def test_escapees_are_gone_when_the_host_is_cancelled(host, tmp_path):
    """As ray.cancel does: KeyboardInterrupt in the thread that waits for the trial."""
    pid_file = tmp_path / "pids"
    procs = []

    def interrupt_once_started():
        read_pids(pid_file)
        os.kill(os.getpid(), signal.SIGUSR1)

    def raise_interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, raise_interrupt)
    try:
        threading.Thread(target=interrupt_once_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            host.run(spec_for(ESCAPEES, pid_file=str(pid_file), then="hang"), 120, {})
        procs = processes(read_pids(pid_file, timeout_s=0))
        assert left_after(procs) == []
    finally:
        signal.signal(signal.SIGUSR1, previous)
        end(procs)
    assert status_of(host.run(spec_for("tests.workloads_for_tests:quick"), 60, {}))["status"] == "ok"


# -- straight to a zygote, as a Ray worker's host does --------------------------------
def start_trial(path, tmp_path):
    """A trial of `starts_escapees` that hangs; (connection, keeper pid, escapee processes)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pid_file = tmp_path / "pids"
    (scratch / "spec.pkl").write_bytes(pickle.dumps(spec_for(ESCAPEES, pid_file=str(pid_file), then="hang")))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall((json.dumps({"scratch": str(scratch), "env": {}}) + "\n").encode())
    keeper = json.loads(conn.makefile().readline())["pid"]
    procs = processes(read_pids(pid_file))
    assert all(alive(p) for p in procs) and len(procs) == 2
    return conn, keeper, procs


def wait_gone(path, within_s=10.0):
    """Until `path` is gone: the zygote removes it right after it reaps the keeper."""
    deadline = time.monotonic() + within_s
    while path.exists():
        assert time.monotonic() < deadline, f"{path} is still there"
        time.sleep(0.02)


def test_escapees_are_gone_when_the_host_hangs_up(node_zygote, tmp_path):
    path, zygote = node_zygote
    conn, keeper, procs = start_trial(path, tmp_path)
    try:
        conn.close()                                 # a Ray worker that died mid-trial
        assert left_after(procs + processes([keeper]), within_s=10) == []
        assert zygote.poll() is None
        wait_gone(tmp_path / "scratch")              # no host will read it: the zygote removes it
    finally:
        end(procs)


def test_orphans_of_a_killed_keeper_are_ended_by_the_zygote(node_zygote, tmp_path):
    """The backstop SIGKILLs the keeper's group: the escapees come back to the zygote (a subreaper)."""
    path, zygote = node_zygote
    conn, keeper, procs = start_trial(path, tmp_path)
    try:
        os.killpg(keeper, signal.SIGKILL)
        assert left_after(procs, within_s=10) == []
        assert zygote.poll() is None
    finally:
        conn.close()
        end(procs)


def test_escapees_are_gone_when_the_zygote_dies(node_zygote, tmp_path):
    """The keeper's death signal is SIGTERM: it ends its trial's tree when the zygote is killed."""
    path, zygote = node_zygote
    conn, keeper, procs = start_trial(path, tmp_path)
    keeper = processes([keeper])                     # taken while it runs: its end is then seen for sure
    try:
        zygote.kill()
        zygote.wait(timeout=10)
        assert left_after(procs + keeper, within_s=10) == []
        assert not (tmp_path / "scratch").exists()   # the keeper, its zygote gone, removed it before it ended
    finally:
        conn.close()
        end(procs)


# -- the local Ray watchdog -----------------------------------------------------------
SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"

FAKE_DRIVER = f"""
import json, subprocess, sys, time
from sweeper import rayguard
session_dir, close = sys.argv[1], sys.argv[2] == "close"
before = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}], start_new_session=True)
guard = rayguard.guard_session(session_dir)
# started after the guard: found only by the session folder on its command line
after = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}, session_dir + "/sockets/x"], start_new_session=True)
import psutil
watchdog = [guard.proc.pid, psutil.Process(guard.proc.pid).create_time()]
if close:
    guard.close()
print(json.dumps({{"pids": [before.pid, after.pid], "watchdog": watchdog[0], "created": watchdog[1],
                  "closed": guard.proc is None}}), flush=True)
time.sleep(3600)
"""


def start_driver(script, *args, timeout_s=180):
    """A driver process and the JSON line it prints once it is set up."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        proc.wait()
        pytest.fail("the driver did not report its processes")
    return proc, json.loads(line)


def test_a_killed_driver_takes_its_session_down(tmp_path):
    session_dir = str(tmp_path / "session_fake")
    driver, info = start_driver(FAKE_DRIVER, session_dir, "keep")
    procs = processes(info["pids"] + [info["watchdog"]])
    try:
        assert all(alive(p) for p in procs)
        driver.kill()
        driver.wait()
        assert left_after(procs, within_s=20) == []     # the watchdog ends too, its work done
    finally:
        driver.kill()
        end(procs)


def same_process_running(pid, created):
    try:
        proc = psutil.Process(pid)
        return alive(proc) and abs(proc.create_time() - created) < 0.01
    except psutil.NoSuchProcess:
        return False


def test_a_closed_guard_leaves_everything_alone(tmp_path):
    """close() returns only once the watchdog has ended (it is gone from the process table when
    the driver reports), so nothing is left that could end the session when the driver dies:
    the session's processes must then be alive at once, with no waiting to see."""
    session_dir = str(tmp_path / "session_fake")
    driver, info = start_driver(FAKE_DRIVER, session_dir, "close")
    procs = processes(info["pids"])
    try:
        assert info["closed"] and not same_process_running(info["watchdog"], info["created"])
        driver.kill()
        driver.wait()
        assert all(alive(p) for p in procs)
    finally:
        driver.kill()
        end(procs)


RAY_DRIVER = """
import json, logging, os, time
import psutil, ray
from sweeper.rayguard import guard_local_ray
from sweeper.executors.ray_executor import ray_session_dir
ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
guard = guard_local_ray(ray_session_dir())
worker = ray.get(ray.remote(lambda: os.getpid()).remote())
tree = [[p.pid, p.create_time()] for p in psutil.Process().children(recursive=True)]
print(json.dumps({"session_dir": ray_session_dir(), "tree": tree, "worker": worker,
                  "watchdog": guard.proc.pid}), flush=True)
time.sleep(3600)
"""


def of_session(session_dir):
    found = []
    for proc in psutil.process_iter():
        try:
            if any(session_dir in arg for arg in proc.cmdline()) and alive(proc):
                found.append(proc)
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_a_sigkilled_driver_leaves_no_local_ray_behind():
    driver, info = start_driver(RAY_DRIVER)
    procs = [p for p in processes(pid for pid, _ in info["tree"])
             if abs(p.create_time() - dict(info["tree"])[p.pid]) < 0.01]
    procs += of_session(info["session_dir"])
    names = {p.pid: n for p in procs if (n := name_of(p))}       # Ray's short-lived ones may be gone
    try:
        assert info["worker"] in names and info["watchdog"] in names
        assert any(n.startswith("ray::DashboardAgent") for n in names.values()), names
        driver.kill()
        driver.wait()
        left = left_after(procs, within_s=20) + [p.pid for p in of_session(info["session_dir"])]
        assert left == [], {pid: names.get(pid) for pid in left}
    finally:
        driver.kill()
        end(procs + of_session(info["session_dir"]))
