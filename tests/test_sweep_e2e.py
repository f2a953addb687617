"""`python -m sweeper +sweep=dataloader` end to end: real Ray, real processes, real DataLoader; then a
user's shards and workload."""
import math
import os

import pandas as pd
import pytest

from sweeper.results import load, read_records
from workloads.shards import ensure_synthetic_shards

pytestmark = pytest.mark.slow

SMALL = ["data.num_shards=4", "data.samples_per_shard=64", "data.seq_len=64", "data.batch_size=8",
         "workload.steps=20", "workload.warmup_steps=3"]
GRID = ["+sweep=dataloader", "data.num_workers=1,2", "data.prefetch_factor=2", "data.pin_memory=false,true",
        "repeats=1"]


def dry_run(args, tmp_path, monkeypatch) -> int:
    """`python -m sweeper ARGS dry_run=true` in this process, as run_sweeper would start it."""
    from hydra.core.global_hydra import GlobalHydra

    from sweeper.__main__ import main
    from tests.conftest import SHARDS

    monkeypatch.setenv("SWEEPER_CACHE", str(SHARDS["cache"]))
    GlobalHydra.instance().clear()
    return main([f"results_dir={tmp_path / 'results'}", *args, "wandb.enabled=false", "dry_run=true"])


def test_dataloader_sweep_end_to_end(sweeper_cli, tmp_path, capsys, monkeypatch):
    result = sweeper_cli(GRID + SMALL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "[1/4]" in out and "[4/4]" in out                       # progress as trials finish
    assert "samples/s" in out and "first batch s" in out           # the final table
    assert "isolation: node (one trial per node at a time)" in out
    run = next((tmp_path / "results" / "dataloader").iterdir())
    assert f"results: {run}" in out

    summary = pd.read_parquet(run / "summary.parquet")
    assert len(summary) == 4 and len(pd.read_csv(run / "summary.csv")) == 4
    grid = set(zip(summary["data.num_workers"], summary["data.pin_memory"]))
    assert grid == {(1, False), (1, True), (2, False), (2, True)}
    assert (summary["status"] == "ok").all()
    for column in ("items_per_s", "step_p50_s", "step_p95_s", "time_to_first_batch_s"):
        values = summary[column].astype(float)
        assert all(math.isfinite(v) and v > 0 for v in values), (column, values)

    records = read_records(run)
    for record in records:
        folder = run / "trials" / record["trial_id"]
        assert {"config.yaml", "steps.parquet", "trial.json", "trial.log"} <= set(os.listdir(folder))
        assert record["pid"] not in (record["driver_pid"], record["worker_pid"], os.getpid())
        assert record["worker_pid"] != record["driver_pid"]
        steps = pd.read_parquet(folder / "steps.parquet")
        assert len(steps) == 23 and steps["warmup"].sum() == 3
        assert record["resources"]["isolation"] == "node"
    assert len({r["pid"] for r in records}) == 4

    # the same grid point has the same id in every run (a dry run, in this process: it starts nothing)
    assert dry_run(GRID + SMALL, tmp_path, monkeypatch) == 0
    dry = capsys.readouterr().out
    assert sorted(line.split()[0] for line in dry.splitlines()[1:]) == sorted(summary["trial_id"])

    summary_again, steps = load(run)
    assert len(summary_again) == 4 and set(steps["trial_id"]) == set(summary["trial_id"])


def test_user_shards_and_user_workload(sweeper_cli, tmp_path):
    """In the driver's process (executor=local): the test above runs the dataloader through Ray, and
    tests/test_executors.py a user's workload."""
    paths = ensure_synthetic_shards(str(tmp_path / "mine"), 3, 32, 32, 1000, 7)
    pattern = paths[0].replace("shard-00000.tar", "shard-{00000..00002}.tar")
    result = sweeper_cli(["data.num_workers=1", f"data.url={pattern}", "data.batch_size=4",
                          "workload.steps=10", "workload.warmup_steps=2", "executor=local", "report.enabled=false",
                          "workload.target=workloads.dataloader:run,tests.workloads_for_tests:quick"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = next((tmp_path / "results" / "single").iterdir())
    records = {r["swept"]["workload.target"]: r for r in read_records(run)}
    assert records["workloads.dataloader:run"]["figures"]["num_shards"] == 3
    assert records["tests.workloads_for_tests:quick"]["figures"]["custom_figure"] == 42.0
    assert all(r["status"] == "ok" for r in records.values())
    config = (run / "trials" / records["workloads.dataloader:run"]["trial_id"] / "config.yaml").read_text()
    assert "shard-{00000..00002}.tar" in config
