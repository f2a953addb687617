"""resources.prestart: the next trial's process made ready while one runs, and the locks that keep
its CUDA start (and a finished trial's end) out of another trial's measured steps."""
import json
import os
import subprocess
import threading
import time

import psutil
import pytest

from sweeper import timeline
from sweeper.probe import Probe
from sweeper.results import read_records
from sweeper.standby import LOCKS, hold, lock_paths, release, wait_quiet
from tests.conftest import fresh_interpreters_young_threshold


def test_a_lock_file_per_visible_gpu_named_safely(tmp_path):
    env = {LOCKS: str(tmp_path), "CUDA_VISIBLE_DEVICES": "2,GPU-1a2b/../c"}
    assert lock_paths(env) == [str(tmp_path / "gpu-2.lock"), str(tmp_path / "gpu-GPU-1a2b____c.lock")]
    assert lock_paths({LOCKS: str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}) == []      # a CPU trial
    assert lock_paths({"CUDA_VISIBLE_DEVICES": "0"}) == []                            # prestart off


def _held_for(paths, seconds):
    """Shared locks on `paths` (as a standby holds them), let go after `seconds` by a thread."""
    fds = hold(paths)
    assert len(fds) == len(paths)
    threading.Timer(seconds, release, [fds]).start()


def test_a_trial_waits_until_no_standby_holds_its_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    _held_for([str(tmp_path / "gpu-1.lock")], 0.4)
    waited, quiet = wait_quiet()
    assert 0.3 < waited < 2.0 and quiet
    assert wait_quiet()[0] < 0.1                 # let go: no wait
    _held_for([str(tmp_path / "gpu-3.lock")], 0.4)
    assert wait_quiet()[0] < 0.1                 # another GPU's standby holds nothing of this trial's


def test_a_standby_stuck_in_its_start_holds_a_trial_up_only_so_long(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    fds = hold([str(tmp_path / "gpu-0.lock")])
    try:
        waited, quiet = wait_quiet(timeout_s=0.2)
        assert 0.2 <= waited < 1.0 and not quiet
        monkeypatch.setattr("sweeper.standby.QUIET_WAIT_S", 0.2)
        probe = Probe(warmup_steps=0)
        with probe:
            with probe.step():
                pass
        assert any("resources.prestart" in w for w in probe.warnings)
    finally:
        release(fds)


def test_the_first_measured_step_waits_and_its_time_leaves_the_wait_out(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    probe = Probe(warmup_steps=2)
    with probe:
        for index in range(4):
            if index == 1:                       # a standby starts during the warm-up
                _held_for([str(tmp_path / "gpu-0.lock")], 0.4)
            begun = time.monotonic()
            with probe.step():
                time.sleep(0.01)
            if index == 1:
                assert time.monotonic() - begun < 0.3          # a warm-up step does not wait
    rows = probe.rows
    assert probe.figures["prestart_wait_s"] > 0.25
    assert [r["warmup"] for r in rows] == [True, True, False, False]
    assert max(r["step_s"] for r in rows) < 0.2                # the wait is in no step's time


def test_without_prestart_the_probe_neither_waits_nor_says_so(monkeypatch):
    monkeypatch.delenv(LOCKS, raising=False)
    probe = Probe(warmup_steps=0)
    with probe:
        with probe.step():
            pass
    assert "prestart_wait_s" not in probe.figures


# -- through the zygote: a standby becomes the next trial --------------------------------------
def _spec(tmp_path, target="tests.workloads_for_tests:quick", more=True, **params):
    from tests.test_isolation import spec_for

    spec = spec_for(target, **params)
    spec["config"].resources.prestart = True
    return {**spec, "scratch_root": str(tmp_path), "more_to_come": more}


def _marks(path):
    found = {}
    for _, pid, name in timeline.read(str(path)):
        found.setdefault(name, []).append(pid)
    return found


@pytest.fixture
def zygote_with_timeline(tmp_path, monkeypatch):
    from sweeper.isolation import ZYGOTE_START_S, _LineReader
    from sweeper.nodezygote import start_zygote

    marks = tmp_path / "timeline.txt"
    monkeypatch.setenv(timeline.VARIABLE, str(marks))
    path = str(tmp_path / "z.sock")
    proc = start_zygote(path, stdout=subprocess.PIPE)
    _LineReader(proc.stdout.fileno()).read(timeout_s=ZYGOTE_START_S)
    yield path, proc, marks
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gone_soon(pids, within_s=10.0):
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


@pytest.mark.slow
def test_each_trial_after_the_first_runs_in_the_standby_made_while_the_one_before_ran(zygote_with_timeline, tmp_path):
    from sweeper.isolation import TrialHost

    path, proc, marks = zygote_with_timeline
    host = TrialHost(path)
    pid_file = tmp_path / "escapees"
    gpu = {"CUDA_VISIBLE_DEVICES": "0"}      # the GPUs' locks are taken and waited for (no CUDA here to start)
    records = [host.run(_spec(tmp_path), 60, gpu).record,
               host.run(_spec(tmp_path, "tests.workloads_for_tests:starts_escapees", pid_file=str(pid_file)), 60, gpu).record,
               host.run(_spec(tmp_path, more=False), 60, gpu).record]
    assert [r.status for r in records] == ["ok", "ok", "ok"], records
    found = _marks(marks)
    ready, started = found["standby_ready"], found["trial_start"]
    assert len(ready) == 2 and started[1:] == ready            # the last asked for none after it
    assert started[0] not in ready
    # none held up: the first trial, forked fresh, does not hold the next standby's locks itself
    assert all(r.figures["prestart_wait_s"] < 1.0 and not r.warnings for r in records), records
    assert (tmp_path / "gpu-0.lock").exists() and _gone_soon(started)
    assert wait_quiet(timeout_s=1.0)[1]          # every lock let go once the processes are gone
    escapees = [int(p) for p in pid_file.read_text().split()]
    assert _gone_soon(escapees)              # the record came back early; its tree is still ended
    assert proc.poll() is None


@pytest.mark.slow
def test_a_standby_goes_when_the_workloads_modules_arrive_and_when_its_zygote_does(zygote_with_timeline, tmp_path):
    from sweeper.isolation import TrialHost, trial_request
    from sweeper.nodezygote import ask_standby, preload_more

    path, proc, marks = zygote_with_timeline
    ask_standby(path, trial_request(_spec(tmp_path), None, {}))
    first = _wait_for_mark(marks, "standby_ready")
    preload_more(path, ["json"])             # forked before them, it would import them again
    assert _gone_soon([first])
    record = TrialHost(path).run(_spec(tmp_path), 60, {}).record      # forked fresh, and asks for the next
    assert record.status == "ok" and first not in _marks(marks)["trial_start"]
    second = _wait_for_mark(marks, "standby_ready", after=[first])
    proc.kill()
    proc.wait(timeout=10)
    assert _gone_soon([second])


def _wait_for_mark(marks, name, after=(), within_s=60.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = [p for p in _marks(marks).get(name, []) if p not in after] if marks.exists() else []
        if pids:
            return pids[0]
        time.sleep(0.05)
    raise AssertionError(f"no {name} mark within {within_s} s")


@pytest.mark.slow
def test_the_first_trial_asked_for_as_it_is_submitted_runs_in_its_standby(zygote_with_timeline, tmp_path):
    """What the Ray executor does for a sweep's first GPU trial: the request may come while the
    standby still starts (it then waits for it) or after."""
    from sweeper.isolation import TrialHost, trial_request
    from sweeper.nodezygote import ask_standby

    path, proc, marks = zygote_with_timeline
    ask_standby(path, trial_request(_spec(tmp_path), None, {}))
    record = TrialHost(path).run(_spec(tmp_path, more=False), 60, {}).record
    assert record.status == "ok"
    assert _marks(marks)["trial_start"] == _marks(marks)["standby_ready"]


@pytest.mark.slow
def test_a_sweep_with_prestart_runs_its_trials_in_standbys_and_leaves_none(sweeper_cli, tmp_path):
    marks = tmp_path / "timeline.txt"
    result = sweeper_cli(["workload.target=tests.workloads_for_tests:quick", "workload.seed=0,1,2,3",
                          "resources.prestart=true", "resources.isolation=pack", "resources.cpus=1",
                          "resources.gpus=0", "report.enabled=false", "history.enabled=false"],
                         env_extra={timeline.VARIABLE: str(marks)})
    assert result.returncode == 0, result.stderr[-2000:]
    found = _marks(marks)
    ready = found["standby_ready"]
    assert len(found["trial_start"]) == 4 and len(set(found["trial_start"]) & set(ready)) >= 2
    assert _gone_soon(ready, within_s=2.0)       # the sweep's end took the unused one too
    records = read_records(next((tmp_path / "results" / "single").iterdir()))
    plain = fresh_interpreters_young_threshold()
    assert len(records) == 4 and {r["figures"]["gc_young_threshold"] for r in records} == {plain}
    assert all(r["figures"]["gc_young_threshold_at_import"] > plain for r in records)    # the zygote's start


@pytest.fixture
def bare_zygote():
    """A Zygote object in this process, serving nothing: its bookkeeping, called directly."""
    import signal
    import socket as sockets

    from sweeper._zygote import Zygote

    wakeup, handler = signal.set_wakeup_fd(-1), signal.getsignal(signal.SIGCHLD)
    listener = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        yield Zygote(listener)
    finally:
        signal.set_wakeup_fd(wakeup)
        signal.signal(signal.SIGCHLD, handler)
        listener.close()


def test_a_report_pipe_closed_by_a_reap_earlier_in_the_same_batch_is_passed_over(bare_zygote):
    """A keeper reaped (its report pipe closed) while the same select() batch still holds that
    pipe's end-of-file: the zygote read a closed descriptor and its loop ended with a KeyError,
    taking every trial on the node down with it."""
    import selectors

    zygote = bare_zygote
    read_end, write_end = os.pipe()
    zygote.reports[read_end] = 12345
    zygote.selector.register(read_end, selectors.EVENT_READ, "report")
    os.close(write_end)                          # the trial process ended: its pipe reads as ended
    batch = [key for key, _ in zygote.selector.select(0) if key.data == "report"]
    assert batch
    zygote._standby_gone(12345)                  # its keeper reaped first in the batch
    for key in batch:
        zygote._handle(key)
    assert read_end not in zygote.reports


def test_a_trial_starting_on_some_gpus_retires_idle_standbys_that_share_them(bare_zygote):
    from sweeper.zygote_standbys import Standby

    zygote, pipes = bare_zygote, {}

    def standby(devices, parked=None):
        key = json.dumps({"CUDA_VISIBLE_DEVICES": devices})
        read_end, pipes[devices] = os.pipe()
        zygote.standbys[key] = Standby(0, pipes[devices], key, parked)
        return key, read_end

    pair, pair_read = standby("0,1")
    one, _ = standby("1")
    waited_for, _ = standby("0,2", parked=("conn", {}))
    zygote._retire_overlapping(json.dumps({"CUDA_VISIBLE_DEVICES": "0"}))
    assert set(zygote.standbys) == {one, waited_for}    # a request waits for the other
    assert os.read(pair_read, 1) == b""                  # the retired one's feed was closed: it ends
