"""Each trial runs in a process of its own, forked from a warm zygote; failures are rows."""
import os
import time

import psutil
import pytest

from sweeper.sweep import Attempt
from sweeper.isolation import TrialHost
from sweeper.record import TrialRecord
from sweeper.plan import ClusterShape, plan_cells
from sweeper.schema import trial_config_from_dict


def spec_for(target, timeout_s=60.0, **params):
    cfg = trial_config_from_dict({"workload": {"target": target, "steps": 5, "warmup_steps": 2, "params": params},
                                  "resources": {"timeout_s": timeout_s}})
    trial = plan_cells([([f"workload.target={target}"], cfg)], ClusterShape([2.0], [0.0]))[0]
    return {"trial_id": trial.trial_id, "cell_id": trial.cell_id, "repeat": 0, "index": 0, "config": cfg,
            "overrides": trial.overrides, "swept": trial.swept, "num_cpus": 1.0, "num_gpus": 0.0,
            "driver_pid": os.getpid()}




def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_ok_trial_runs_in_its_own_process_and_returns_its_files(host):
    outcome = host.run(spec_for("tests.workloads_for_tests:quick"), 60, {})
    record = outcome.record
    assert record.status == "ok", record
    assert record.pid not in (os.getpid(), host.proc.pid)
    assert record.summary["steps"] == 5 and record.summary["warmup_steps"] == 2
    assert record.figures["custom_figure"] == 42.0
    assert set(outcome.files) >= {"steps.parquet", "trial.log"}


def test_a_trial_that_prints_for_hours_keeps_the_start_and_the_end_of_its_output(tmp_path):
    """Its whole output used to be read into memory, shipped to the driver and written out."""
    from sweeper.isolation import LOG_END_BYTES, LOG_HEAD_BYTES, kept_log

    log = tmp_path / "trial.log"
    start, end = b"s" * LOG_HEAD_BYTES, b"e" * LOG_END_BYTES
    log.write_bytes(start + b"m" * 3000 + end)
    kept = kept_log(log)
    assert kept.startswith(start) and kept.endswith(end) and b"m" not in kept
    assert b"[sweeper: 3000 bytes of this trial's output left out here" in kept
    log.write_bytes(b"short\n")
    assert kept_log(log) == b"short\n" and kept_log(tmp_path / "none.log") == b""


@pytest.mark.slow
def test_a_chatty_trial_ships_and_keeps_a_bounded_log(host):
    from sweeper.isolation import LOG_END_BYTES, LOG_HEAD_BYTES

    outcome = host.run(spec_for("tests.workloads_for_tests:chatty", mb=12), 60, {})
    assert outcome.record.status == "ok", outcome.record
    log = outcome.files["trial.log"]
    assert len(log) < LOG_HEAD_BYTES + LOG_END_BYTES + 200 and log.endswith(b"the last line\n")
    assert b"bytes of this trial's output left out here" in log


@pytest.mark.slow
def test_each_trial_gets_a_fresh_process(host):
    pids = {host.run(spec_for("tests.workloads_for_tests:quick"), 60, {}).record.pid for _ in range(3)}
    assert len(pids) == 3


@pytest.mark.slow
def test_a_raising_workload_is_a_failed_row(host):
    record = host.run(spec_for("tests.workloads_for_tests:raises"), 60, {}).record
    assert record.status == "failed"
    assert record.error_type == "ValueError"
    assert record.error_message == "injected failure for the test"
    assert "ValueError: injected failure for the test" in record.log_tail


@pytest.mark.slow
def test_a_missing_workload_function_is_a_failed_row(host):
    spec = spec_for("tests.workloads_for_tests:quick")     # the plan refuses a missing one before any trial;
    spec["config"].workload.target = "tests.workloads_for_tests:nope"    # here it went missing after planning
    record = host.run(spec, 60, {}).record
    assert record.status == "failed" and record.error_type == "AttributeError"
    assert "has no 'nope'" in record.error_message


@pytest.mark.slow
def test_a_trial_killed_by_a_signal_is_a_failed_row(host):
    record = host.run(spec_for("tests.workloads_for_tests:kills_itself"), 60, {}).record
    assert record.status == "failed"
    assert record.error_type == "TrialKilled" and "SIGKILL" in record.error_message


@pytest.mark.slow
def test_a_hung_trial_is_ended_with_its_children(host, tmp_path):
    pid_file = tmp_path / "children"
    started = time.monotonic()
    record = host.run(spec_for("tests.workloads_for_tests:hangs_with_children", timeout_s=3.0,
                               pid_file=str(pid_file)), 3.0, {}).record
    assert time.monotonic() - started < 20
    assert record.status == "timeout" and record.error_type == "TrialTimeout"
    children = [int(p) for p in pid_file.read_text().split()]
    time.sleep(0.5)
    assert not alive(record.pid)
    assert [c for c in children if alive(c)] == []
    # the host is still usable afterwards
    assert host.run(spec_for("tests.workloads_for_tests:quick"), 60, {}).record.status == "ok"


def test_the_summary_is_rewritten(tmp_path):
    import pandas as pd

    from sweeper.results import read_records
    from tests.conftest import ROOT

    records = read_records(ROOT / "tests" / "data" / "sleepy-a")[:3]
    sweep = quiet_sweep(tmp_path, len(records))
    sweep.SUMMARY_EVERY_S = 3600
    for record in records:
        sweep.finish(TrialRecord.from_dict(record), Attempt(None, {}, {}), {})
    assert len(pd.read_parquet(tmp_path / "summary.parquet")) == 1        # the first trial only
    assert len(read_records(tmp_path)) == 3                                # every trial folder at once
    sweep.write_summary()
    assert len(pd.read_parquet(tmp_path / "summary.parquet")) == 3


def quiet_sweep(run, total):
    """The driver's Sweep with no trial publishers, as a unit."""
    from sweeper.sweep import Job, Sweep
    from sweeper.schema import RootConfig

    root = RootConfig()
    from sweeper.progress import Progress

    sweep = Sweep(run, root, [Job([], root, {"wandb": {"enabled": False}})], total)
    sweep.on_trial = lambda *args: None
    sweep.progress = Progress(total)          # the progress lines go to stdout, as in a sweep
    return sweep




@pytest.mark.slow
def test_one_node_zygote_serves_several_hosts_at_once(node_zygote):
    """As the Ray workers of one node do: each trial a fresh child of the same zygote, side by side."""
    import threading

    path, proc = node_zygote
    records = []

    def run_one():
        records.append(TrialHost(path).run(spec_for("tests.workloads_for_tests:quick", sleep_s=0.3), 60, {}).record.to_dict())

    threads = [threading.Thread(target=run_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert len({r["pid"] for r in records}) == 2 and proc.pid not in {r["pid"] for r in records}
    first, second = sorted(records, key=lambda r: r["started_at"])
    assert second["started_at"] < first["ended_at"]            # they overlapped


@pytest.mark.slow
def test_a_host_that_hangs_up_takes_its_trial_down(node_zygote, tmp_path):
    """A Ray worker that dies or is cancelled mid-trial: the zygote kills that trial's group."""
    import json
    import pickle
    import socket

    path, proc = node_zygote
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pid_file = tmp_path / "children"
    (scratch / "spec.pkl").write_bytes(pickle.dumps(
        spec_for("tests.workloads_for_tests:hangs_with_children", pid_file=str(pid_file))))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall((json.dumps({"scratch": str(scratch), "env": {}}) + "\n").encode())
    pid = json.loads(conn.makefile().readline())["pid"]
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(p) for p in pid_file.read_text().split()]
    assert alive(pid) and all(alive(c) for c in children)
    conn.close()
    deadline = time.monotonic() + 10
    while (alive(pid) or any(alive(c) for c in children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid) and not any(alive(c) for c in children)
    assert proc.poll() is None                                  # the zygote itself carries on


def test_a_credential_in_a_record_reaches_neither_the_summary_nor_the_progress_line(tmp_path, monkeypatch, capsys):
    from sweeper.results import read_records
    from tests.conftest import ROOT

    secret = "supersecretvalue123"
    monkeypatch.setenv("MY_TOKEN", secret)
    record = read_records(ROOT / "tests" / "data" / "sleepy-a")[0]
    record = {**record, "overrides": record["overrides"] + [f"+x={secret}"], "status": "failed",
              "error_type": "ValueError", "error_message": f"bad value {secret}"}
    sweep = quiet_sweep(tmp_path, 1)
    sweep.finish(TrialRecord.from_dict(record), Attempt(None, {}, {}), {})
    sweep.write_summary()
    assert secret not in (tmp_path / "summary.csv").read_text()
    assert secret.encode() not in (tmp_path / "summary.parquet").read_bytes()
    out = capsys.readouterr().out
    assert "[1/1] failed" in out and secret not in out
    assert secret not in str(sweep.records)
