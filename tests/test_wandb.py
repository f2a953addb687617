"""The W&B sink, offline: one run per trial plus a summary run, read back from their record logs."""
import json
import shutil
import struct
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper import publishers
from sweeper.analysis.run import analyze_run, cell_summary
from sweeper.publishers import wandb_sink
from sweeper.redact import redact
from sweeper.results import read_records
from sweeper.schema import AnalysisConfig

DATA = Path(__file__).parent / "data"
SECRET = "test-secret-value-0123456789"


def read_wandb_records(path: Path):
    """Records of a run-*.wandb file: a 7-byte header, then 32 KiB blocks of chunks with a
    7-byte header each (CRC32, little-endian uint16 length, type 1 full/2 first/3 middle/4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:                 # block tail too short for a header: padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
        elif kind == 0 and length == 0:
            break
    return records


def history_and_summary(run_file: Path):
    history, summary, config = [], {}, {}
    for record in read_wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({i.nested_key[0] if i.nested_key else i.key: json.loads(i.value_json)
                            for i in record.history.item})
        elif kind == "summary":
            summary.update({(u.nested_key[0] if u.nested_key else u.key): json.loads(u.value_json)
                            for u in record.summary.update})
        elif kind == "run":
            config = {(u.nested_key[0] if u.nested_key else u.key): json.loads(u.value_json)
                      for u in record.run.config.update}
            summary["_name"] = record.run.display_name
    return history, summary, config


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    """Two trials and the summary run of a copy of a real run, offline, with a fake secret in the env."""
    pytest.importorskip("wandb")
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_API_KEY", SECRET)
    mp.setenv("MY_SERVICE_TOKEN", SECRET)
    run = tmp_path_factory.mktemp("wb") / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    records = read_records(run)
    root = {"wandb": {"enabled": True, "mode": "offline"}, "report": {"enabled": False},
            "history": {"enabled": False}}      # no store in the working directory
    trials = [next(r for r in records if r["is_baseline"]), next(r for r in records if not r["is_baseline"])]
    trials[1] = {**trials[1], "overrides": trials[1]["overrides"] + [f"+ray.runtime_env.env_vars.TOKEN={SECRET}"]}
    trials[1] = redact(trials[1])         # as the driver hands every record on: redacted once, where it enters
    for record in trials:
        publishers.on_trial(run, record, root)
        publishers.drain()
    data, analysis = analyze_run(run, AnalysisConfig(), records=records, n_resamples=100)
    publishers.on_sweep_end(run, data, analysis, root)
    import wandb

    wandb.teardown()          # W&B's service has written out every run file before they are read
    yield run, trials, analysis
    mp.undo()


def _runs(run: Path):
    return {history_and_summary(f)[1]["_name"]: f for f in sorted(run.glob("wandb/offline-run-*/run-*.wandb"))}


@pytest.mark.slow
def test_one_offline_run_per_trial_plus_summary(wandb_run):
    run, trials, _ = wandb_run
    names = set(_runs(run))
    assert names == {trials[0]["trial_id"], trials[1]["trial_id"], "same-a-summary"}


@pytest.mark.slow
def test_trial_run_holds_its_steps_and_figures(wandb_run):
    run, trials, _ = wandb_run
    record = trials[1]
    history, summary, config = history_and_summary(_runs(run)[record["trial_id"]])
    steps = pd.read_parquet(run / "trials" / record["trial_id"] / "steps.parquet")
    assert [h["_step"] for h in history] == list(steps["step"])
    assert [h["step_s"] for h in history] == pytest.approx(list(steps["step_s"]))
    assert "phase_wait_s" in history[-1] and "warmup" in history[0]
    assert summary["step_p50_s"] == pytest.approx(record["summary"]["step_p50_s"])
    assert summary["step_p95_s"] == pytest.approx(record["summary"]["step_p95_s"])
    assert summary["status"] == "ok"
    assert config["data.batch_size"] == record["swept"]["data.batch_size"]
    assert config["cell_id"] == record["cell_id"] and config["repeat"] == record["repeat"]


@pytest.mark.slow
def test_summary_run_holds_the_analysis_table_and_figures(wandb_run):
    run, _, analysis = wandb_run
    folder = _runs(run)["same-a-summary"].parent
    tables = list(folder.glob("files/media/table/verdicts*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    verdict = table["columns"].index("verdict")
    assert sorted(row[verdict] for row in table["data"]) == ["baseline", "faster"]    # twice the items/s
    # the same per-cell figures as cells.parquet, the report and the terminal
    expected = cell_summary(analysis)
    rate = table["columns"].index("items_per_s")
    assert [row[rate] for row in table["data"]] == pytest.approx(list(expected["items_per_s"]))
    _, summary, _ = history_and_summary(_runs(run)["same-a-summary"])
    assert "recommended: batch_size=16" in summary["recommendation"]


@pytest.mark.slow
def test_no_credentials_in_anything_written(wandb_run):
    run, trials, _ = wandb_run
    _, _, config = history_and_summary(_runs(run)[trials[1]["trial_id"]])
    assert "TOKEN=[redacted:" in config["overrides"]         # an override that carried a secret
    for path in (run / "wandb").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_disabled_writes_nothing(tmp_path):
    from types import SimpleNamespace

    record = read_records(DATA / "sleepy-a")[0]
    for settings in ({"enabled": False}, {"enabled": True, "mode": "disabled"}):
        wandb_sink.on_trial(tmp_path, record, {"wandb": settings})
        wandb_sink.on_sweep_end(publishers.SweepEnd(tmp_path, SimpleNamespace(records=[record]), None,
                                                    {"wandb": settings}))
    assert not (tmp_path / "wandb").exists()


def test_not_installed_is_one_plain_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)          # import wandb -> ImportError
    monkeypatch.setattr(wandb_sink, "_state", {"wandb": None, "warned": False})
    record = read_records(DATA / "sleepy-a")[0]
    for _ in range(3):
        publishers.on_trial(tmp_path, record, {})
        publishers.drain()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "wandb is not installed" in line]
    assert warnings == ["note: wandb is not installed: no W&B runs (pip install wandb, or wandb.enabled=false)"]
    assert not (tmp_path / "wandb").exists()


def test_a_wandb_failure_never_fails_the_sweep(tmp_path, monkeypatch, capsys):
    class Broken:
        Settings = dict

        @staticmethod
        def init(**kwargs):
            raise RuntimeError("wandb service unreachable")

    monkeypatch.setattr(wandb_sink, "_state", {"wandb": Broken, "warned": False})
    record = read_records(DATA / "sleepy-a")[0]
    publishers.on_trial(tmp_path, record, {})                # must not raise
    publishers.drain()
    lines = [line for line in capsys.readouterr().err.splitlines() if "wandb service unreachable" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: output sweeper.publishers.wandb_sink.on_trial failed")
