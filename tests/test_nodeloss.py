"""The local Ray node lost mid-sweep, in-process: the line, what becomes of each trial, the night.
The real raylet killed under a real sweep is tests/test_reliability.py's (slow)."""
import json
import signal
import time

import pytest

from sweeper import driver, exitcodes, overnight
from sweeper.executors.base import NodeLost
from sweeper.executors.nodewatch import how_it_ended
from sweeper.faults import node_lost_line
from tests.fake_executor import FakeExecutor
from tests.test_driver import jobs_for, records

KILLED = how_it_ended("its raylet", -signal.SIGKILL)


def test_the_line_says_how_the_node_ended_where_its_logs_are_and_what_became_of_the_trials():
    assert node_lost_line(KILLED, "/tmp/ray/session_1", 1, 2, 5) == (
        "error: the local Ray node stopped mid-sweep (its raylet was killed by SIGKILL: the kernel's out-of-memory "
        "killer, or someone; Ray's logs: /tmp/ray/session_1); 1 finished trial is kept, 2 trials it ran were cut "
        "short, 5 did not start; run the command again with resume=latest to run them")
    assert node_lost_line(how_it_ended("its GCS server", 1), None, 0, 1, 0) == (
        "error: the local Ray node stopped mid-sweep (its GCS server exited with code 1); 0 finished trials are "
        "kept, 1 trial it ran was cut short; run the command again with resume=latest to run them")


class LosesItsNode(FakeExecutor):
    """Its node dies as the second trial ends (that trial's record still comes back); the third
    and fourth trials submitted were running then, the rest had not started."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = []

    def wait(self, handles, timeout_s, all_ready=False):
        if all_ready:           # what had ended by the time the loss was noticed
            return [h for h in handles if h in self.ended]
        done = super().wait(handles, timeout_s)
        self.ended += done
        return done

    def node_lost(self):
        if len(self.ended) < 2:
            return None
        running = frozenset(spec["trial_id"] for spec in self.submitted[2:4])
        return NodeLost(KILLED, "/tmp/ray/session_1", running)


@pytest.fixture
def run_with(tmp_path, monkeypatch):
    monkeypatch.setattr(driver, "publish_end", lambda sweep, root, run: exitcodes.OK)

    def run(executor, **settings):
        monkeypatch.setattr(driver, "make_executor", lambda root, preload: executor)
        return driver.run_sweep(jobs_for(tmp_path, {"workload.seed": list(range(6))}, **settings), "multirun: true\n")
    return run


def test_a_lost_node_keeps_what_came_back_rows_what_ran_and_lists_what_never_started(run_with, tmp_path, capsys):
    lossy = LosesItsNode()
    code = run_with(lossy, **{"resources.max_retries": 2})
    ids = [spec["trial_id"] for spec in lossy.submitted]
    found = records(tmp_path)
    run = tmp_path / "results" / "single" / "r1"
    assert code == exitcodes.NODE_LOST and len(lossy.submitted) == 6          # none retried on a node that is gone
    assert [found[t]["status"] for t in ids[:2]] == ["ok", "ok"]
    assert [(found[t]["status"], found[t]["error_type"]) for t in ids[2:4]] == [("failed", "NodeDied")] * 2
    assert "the local Ray node stopped while this trial ran (its raylet was killed" in found[ids[2]]["error_message"]
    assert set(found) == set(ids[:4])
    skipped = json.loads((run / "skipped.json").read_text())
    assert [(s["trial_id"], s["reason"]) for s in skipped] == [(t, "node lost") for t in ids[4:]]
    assert capsys.readouterr().err.splitlines() == [node_lost_line(KILLED, "/tmp/ray/session_1", 2, 2, 2)]
    again = FakeExecutor()
    assert run_with(again, resume="latest") == exitcodes.OK
    assert sorted(s["trial_id"] for s in again.submitted) == sorted(ids[2:])
    assert json.loads((run / "skipped.json").read_text()) == []


def test_a_night_goes_on_past_a_sweep_whose_node_was_lost_and_its_manifest_says_so(tmp_path, monkeypatch):
    """Each sweep starts a Ray of its own: the next one runs. night.json names what happened and
    lists the trials that did not start (that sweep's skipped.json)."""
    job = jobs_for(tmp_path, {"workload.seed": [0]}, **{"overnight.sweeps": ["lost", "after"]})[0]
    night = tmp_path / "results" / "overnight" / "r1"
    left = [{"trial_id": "abc-0", "reason": "node lost"}]

    def run_one(name, command):
        (night / name / "r1").mkdir(parents=True)
        (night / name / "r1" / "skipped.json").write_text(json.dumps(left if name == "lost" else []))
        return exitcodes.NODE_LOST if name == "lost" else exitcodes.OK

    monkeypatch.setattr(overnight, "run_one", run_one)
    assert overnight._night(job, night, time.time()) == exitcodes.NODE_LOST
    manifest = json.loads((night / "night.json").read_text())
    assert [(s["name"], s["status"]) for s in manifest["sweeps"]] == [("lost", "node lost"), ("after", "ok")]
    assert manifest["sweeps"][0]["skipped_trials"] == left and manifest["exit_code"] == exitcodes.NODE_LOST



class Process:
    """A Popen as the watch reads it (no process: no pidfd, so the watch looks five times a second)."""
    pid = -1

    def __init__(self) -> None:
        self.returncode = None

    def poll(self):
        return self.returncode


def test_the_watch_notes_which_process_ended_and_how_and_what_ran_then():
    from sweeper.executors.nodewatch import NodeWatch

    raylet, gcs = Process(), Process()
    watch = NodeWatch({"gcs_server": gcs, "raylet": raylet}, lambda: frozenset({"abc-0"}))
    try:
        raylet.returncode = -signal.SIGKILL
        deadline = time.monotonic() + 10
        while watch.what is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (watch.what, watch.running) == (KILLED, frozenset({"abc-0"}))
    finally:
        watch.close()
    calm = Process()
    quiet = NodeWatch({"raylet": calm}, lambda: frozenset({"abc-0"}))
    quiet.close()                      # the driver is about to end the node itself: no loss is noted
    calm.returncode = -signal.SIGKILL
    assert quiet.what is None and not quiet.thread.is_alive()


@pytest.mark.slow
def test_a_raylet_that_died_while_ray_started_is_the_one_line_not_a_bug(tmp_path):
    """Ray waits 30 s for a raylet to register, then raises an error that read as a bug in sweeper
    (a traceback, exit 70). Ray's processes are this driver's children: a dead one is a zombie."""
    import shutil
    import subprocess

    from sweeper.errors import SweeperError
    from sweeper.executors.nodewatch import died_starting, raise_if_node_died

    raise_if_node_died()                                     # nothing of Ray's has died: nothing to say
    raylet = subprocess.Popen([shutil.copy("/bin/sleep", tmp_path / "raylet"), "60"])
    raylet.send_signal(signal.SIGKILL)
    while not open(f"/proc/{raylet.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
        time.sleep(0.01)
    with pytest.raises(SweeperError) as raised:
        raise_if_node_died()
    assert raised.value.code == exitcodes.NODE_LOST
    assert str(raised.value) == (f"the local Ray node stopped while Ray started ({KILLED}); no trial ran; "
                                 f"run the command again")
    assert died_starting() is None                           # reaped: said once
