"""MLflow tracking (sweeper/publishers/mlflow_sink.py) with the real library and its embedded
sqlite store, no server: a parent run per sweep, a nested run per trial, read back with MlflowClient."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sweeper import publishers
from sweeper.errors import ConfigError
from sweeper.publishers import mlflow_sink
from sweeper.results import read_records
from sweeper.schema import root_config_from_dict

DATA = Path(__file__).parent / "data"


# ---------------------------------------------------------------------- config


def test_off_by_default_and_checked_by_dotted_key():
    assert root_config_from_dict({}).mlflow.enabled is False
    with pytest.raises(ConfigError, match="^mlflow.experiment: must not be empty"):
        root_config_from_dict({"mlflow": {"experiment": ""}})
    with pytest.raises(ConfigError, match="^mlflow.enabld: unknown key"):
        root_config_from_dict({"mlflow": {"enabld": True}})


def test_enabled_without_the_package_is_one_line_before_any_trial(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(ConfigError) as err:
        root_config_from_dict({"mlflow": {"enabled": True}})
    message = str(err.value)
    assert message.startswith("mlflow.enabled: ") and "pip install 'sweeper[mlflow]'" in message
    assert "\n" not in message
    assert root_config_from_dict({"mlflow": {"enabled": False}}).mlflow.enabled is False   # off: no check


def test_disabled_writes_nothing(tmp_path):
    record = read_records(DATA / "sleepy-a")[0]
    assert publishers.trackers(tmp_path, record, {}).get("mlflow") is None
    mlflow_sink.on_trial(tmp_path, record, {"mlflow": {"enabled": False}})
    mlflow_sink.on_sweep_end(publishers.SweepEnd(tmp_path, SimpleNamespace(records=[record]), None, {"mlflow": {}}))
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------- failures


@pytest.mark.parametrize("uri", ["bogus://nowhere", "http://127.0.0.1:9"])
def test_a_bad_tracking_uri_is_one_line(tmp_path, capsys, uri):
    """Every hook of a whole (copied) run, against a URI that cannot work: nothing raises, one line."""
    pytest.importorskip("mlflow")
    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    root = {"mlflow": {"enabled": True, "tracking_uri": uri}, "wandb": {"enabled": False}}
    records = read_records(run)
    for record in records:
        record = dict(record, trackers=publishers.trackers(run, record, root))
        assert "mlflow" not in record["trackers"]
        mlflow_sink.on_trial(run, record, root)
    mlflow_sink.on_sweep_end(publishers.SweepEnd(run, SimpleNamespace(records=records), None, root))
    lines = [line for line in capsys.readouterr().err.splitlines() if "mlflow" in line.lower()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: mlflow: connecting failed ({uri})")


def test_credentials_in_the_uri_are_not_shown():
    assert mlflow_sink.redact_text("https://me:hunter22@mlflow.example:5000") == "https://***@mlflow.example:5000"
    assert mlflow_sink.redact_text("sqlite:////tmp/run/mlflow.db") == "sqlite:////tmp/run/mlflow.db"


# A tracking server that cannot be reached, in a real sweep: one line, the exit code left alone, no
# retries (tests/test_secrets.py, its uri-with-password case).


# ---------------------------------------------------------------------- a real sweep


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """A real sweep (a cell that works and one that raises, 2 repeats; the baseline gets 4),
    then the store read back. In the driver's process (executor=local): the driver writes MLflow
    whichever executor ran the trials, and tests/test_secrets.py runs MLflow's store beside Ray."""
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from tests.conftest import run_sweeper

    tmp = tmp_path_factory.mktemp("mlflow")
    proc = run_sweeper(["workload.target=tests.workloads_for_tests:quick,tests.workloads_for_tests:raises",
                        "workload.steps=6", "workload.warmup_steps=2", "repeats=2", "mlflow.enabled=true",
                        "executor=local"], tmp)
    assert proc.returncode == 1, proc.stderr[-3000:]          # the raising cell's trials did not finish
    assert "mlflow:" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    run = next((tmp / "results").glob("*/*/summary.parquet")).parent
    state = json.loads((run / "mlflow.json").read_text())
    assert state["tracking_uri"] == f"sqlite:///{(run / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=state["tracking_uri"])
    runs = client.search_runs([state["experiment_id"]], max_results=1000)
    return SimpleNamespace(run=run, state=state, client=client, runs=runs,
                           summary=pd.read_parquet(run / "summary.parquet"), records=read_records(run))


def _children(t):
    return {r.info.run_name: r for r in t.runs if r.data.tags.get("mlflow.parentRunId")}


@pytest.mark.slow
def test_one_parent_and_a_nested_run_per_trial(tracked):
    parents = [r for r in tracked.runs if not r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.run_id == tracked.state["parent_run_id"]
    assert parents[0].info.run_name == tracked.run.name and parents[0].info.status == "FINISHED"
    children = _children(tracked)
    assert set(children) == set(tracked.summary["trial_id"]) and len(children) == 6
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children.values())
    for record in tracked.records:                       # each record names its run, as mlflow.json does
        run_id = record["trackers"]["mlflow"]["run_id"]
        assert run_id == children[record["trial_id"]].info.run_id == tracked.state["trials"][record["trial_id"]]
        assert children[record["trial_id"]].info.status == ("FINISHED" if record["status"] == "ok" else "FAILED")


@pytest.mark.slow
def test_trial_params_and_metrics_are_the_summary_rows(tracked):
    children = _children(tracked)
    for row in tracked.summary.to_dict("records"):
        child = children[row["trial_id"]].data
        for key in ("trial_id", "cell_id", "status", "workload", "workload.target"):
            assert child.params[key] == str(row[key])
        assert child.params["repeat"] == str(row["repeat"])
        if row["status"] != "ok":
            assert child.params["error_type"] == "ValueError"
            continue
        for key in ("items_per_s", "step_p50_s", "step_p95_s", "step_mean_s", "custom_figure"):
            assert child.metrics[key] == pytest.approx(row[key], rel=1e-12), key


@pytest.mark.slow
def test_per_step_series_are_the_measured_steps(tracked):
    for row in tracked.summary[tracked.summary["status"] == "ok"].to_dict("records"):
        steps = pd.read_parquet(tracked.run / "trials" / row["trial_id"] / "steps.parquet")
        measured = steps[~steps["warmup"].astype(bool)]
        run_id = tracked.state["trials"][row["trial_id"]]
        history = tracked.client.get_metric_history(run_id, "step_s")
        assert len(history) == len(measured) == row["steps"] == 6
        assert [m.step for m in sorted(history, key=lambda m: m.step)] == measured["step"].tolist()
        assert sorted(m.value for m in history) == pytest.approx(sorted(measured["step_s"]))
        assert len(tracked.client.get_metric_history(run_id, "phase_work_s")) == 6


@pytest.mark.slow
def test_artifacts_trial_folders_and_the_sweeps_cells_and_report(tracked):
    for trial_id, run_id in tracked.state["trials"].items():
        names = {a.path for a in tracked.client.list_artifacts(run_id)}
        assert {"trial.json", "steps.parquet", "config.yaml"} <= names, names
        local = tracked.run / "mlruns"
        assert local.is_dir()                                 # artifacts stay in the run folder
    parent = tracked.state["parent_run_id"]
    names = {a.path for a in tracked.client.list_artifacts(parent)}
    assert {"cells.parquet", "cells.csv", "report.html", "summary.parquet"} <= names, names
    path = tracked.client.download_artifacts(parent, "cells.parquet", str(tracked.run.parent / "dl"))
    pd.testing.assert_frame_equal(pd.read_parquet(path), pd.read_parquet(tracked.run / "cells.parquet"))
    data = tracked.client.get_run(parent).data
    cells = pd.read_parquet(tracked.run / "cells.parquet")
    recommended = data.params["recommended_cell_id"]
    assert recommended in set(cells["cell_id"]) and data.tags["sweeper.recommended_cell_id"] == recommended
    assert data.metrics["failed_trials"] == 2 and data.metrics["trials"] == 6


@pytest.mark.slow
def test_a_resumed_run_keeps_its_parent(sweeper_cli, tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    args = ["workload.target=tests.workloads_for_tests:quick,tests.workloads_for_tests:raises",
            "workload.steps=3", "workload.warmup_steps=1", "executor=local", "mlflow.enabled=true"]
    first = sweeper_cli(args)
    again = sweeper_cli([*args, "resume=latest"])                 # re-runs the failed trial only
    assert first.returncode == again.returncode == 1, again.stderr[-3000:]
    assert "mlflow:" not in first.stdout + first.stderr + again.stdout + again.stderr
    run = next((tmp_path / "results").glob("*/*/mlflow.json")).parent
    state = json.loads((run / "mlflow.json").read_text())
    runs = MlflowClient(state["tracking_uri"]).search_runs([state["experiment_id"]])
    parents = [r for r in runs if not r.data.tags.get("mlflow.parentRunId")]
    assert [p.info.run_id for p in parents] == [state["parent_run_id"]] and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 3 and len(state["trials"]) == 2        # the failed trial twice, the other once
    failed = [r for r in children if r.info.status == "FAILED"]
    assert len(failed) == 2 and failed[0].info.run_name == failed[1].info.run_name
    assert state["trials"][failed[0].info.run_name] == max(failed, key=lambda r: r.info.start_time).info.run_id


@pytest.mark.slow
def test_the_sweeps_run_holds_the_regressions_the_history_handed_it(tmp_path):
    """In-process on a copied run: the sweep-end view gets the history's alerts as data."""
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from sweeper import history
    from sweeper.analysis.run import analyze_run
    from sweeper.history.detect import Alert
    from sweeper.schema import AnalysisConfig

    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    data, analysis = analyze_run(run, AnalysisConfig(), n_resamples=20)
    alert = Alert("m", "same-a", "c", "batch_size=16", "p95", "r2", "d", 2.0, "r1", 1.0, 2.0, 0.01, "slower", "r2",
                  "significant")
    recorded = history.Recorded(tmp_path / "store", (alert,))
    mlflow_sink.on_sweep_end(publishers.SweepEnd(run, data, analysis, {"mlflow": {"enabled": True}}, recorded))
    state = json.loads((run / "mlflow.json").read_text())
    parent = MlflowClient(tracking_uri=state["tracking_uri"]).get_run(state["parent_run_id"]).data
    assert parent.tags["sweeper.regressions"] == alert.line() and parent.metrics["regressions"] == 1.0
