"""The terminal: the final table, footer and verdicts as views of one Analysis, compared exactly."""
import dataclasses
import os
from pathlib import Path

import pytest

from sweeper import publishers
from sweeper.analysis.run import analyze_run
from sweeper.analysis.text import cell_label, short_keys
from sweeper.display import footer, progress_line, results_table
from sweeper.report import tables
from sweeper.schema import AnalysisConfig
from tests.synthetic_runs import loader_run, steady, write_run

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden" / "dataloader-r5.terminal.txt"
ROOT = {"resources": {"isolation": "node"}, "report": {"enabled": False}}


@pytest.fixture(scope="module")
def loader(tmp_path_factory):
    """A synthetic loader run (tests/synthetic_runs.py) with one failed repeat."""
    run = tmp_path_factory.mktemp("runs") / "r1"
    records = loader_run(run)
    (run / "trials" / "burst-1" / "steps.parquet").unlink()
    failed = next(r for r in records if r["trial_id"] == "burst-1")
    failed.update(status="failed", error_type="RuntimeError", summary={}, figures={})
    failed["overrides"] = failed["overrides"] + ["analysis.baseline='data.num_workers=2 data.prefetch_factor=2'"]
    return (run, *analyze_run(run, AnalysisConfig(), records=records, n_resamples=200))


def test_final_table_is_best_first_by_throughput(loader):
    _, data, analysis = loader
    assert results_table(data, analysis).splitlines() == [
        "num_workers  prefetch_factor  samples/s  p50 ms  p95 ms  first batch s  status  cell",
        "-----------  ---------------  ---------  ------  ------  -------------  ------  -----",
        "4            2                    3,997    7.99    8.27          0.075  ok      more",
        "2            2                    3,202   10.00   10.27          0.105  ok      base",
        "2            8                    2,361    2.01   60.22          0.080  5/6 ok  burst",
    ]


def test_final_table_follows_the_metric(loader):
    run, data, _ = loader
    _, by_p50 = analyze_run(run, AnalysisConfig(metric="p50"), records=data.records, n_resamples=200)
    assert [line.split()[-1] for line in results_table(data, by_p50).splitlines()[2:]] == ["burst", "more", "base"]


def test_footer_names_isolation_and_how_to_reproduce_failures(loader):
    run, data, _ = loader
    assert footer(data, "node", "results/x/1").splitlines() == [
        "isolation: node (one trial per node at a time)",
        "1 trial(s) did not finish; to reproduce one:",
        "  python -m sweeper data.num_workers=2 data.prefetch_factor=8 +sweep=loader "
        "\"analysis.baseline='data.num_workers=2 data.prefetch_factor=2'\"  # failed: RuntimeError",
        "results: results/x/1",
    ]


def test_footer_offers_resume_not_a_reproduction_for_trials_cut_short(loader):
    run, data, _ = loader
    failed = next(r for r in data.records if r["status"] != "ok")
    cut = [{**failed, "status": "failed", "error_type": "NodeDied"}, {**failed, "status": "cancelled"}]
    lines = footer(dataclasses.replace(data, records=[*data.records, *cut]), "node", "results/x/1").splitlines()
    assert lines[1:3] == ["2 trial(s) were cut short (the sweep was stopped, or its Ray node died), not failed by "
                          "themselves; the same command with resume=latest runs them again",
                          "1 trial(s) did not finish; to reproduce one:"]
    assert "NodeDied" not in "\n".join(lines) and "cancelled" not in "\n".join(lines)


def test_terminal_end_of_a_real_run_matches_golden():
    """The whole end of a sweep of tests/data/dataloader-r5: table, footer (pin_memory had no
    effect on that CPU machine), verdicts, noise floor, recommendation."""
    run = DATA / "dataloader-r5"
    data, analysis = analyze_run(run, AnalysisConfig())      # today's defaults (the run's own said p50)
    text = publishers.terminal_end(publishers.SweepEnd(run, data, analysis, ROOT)).replace(str(run), "<run>")
    if os.environ.get("SWEEPER_UPDATE_GOLDEN"):
        GOLDEN.write_text(text + "\n")
    assert text + "\n" == GOLDEN.read_text(), "terminal output changed; SWEEPER_UPDATE_GOLDEN=1 rewrites it"
    assert "True*" in text and "* pin_memory=True had no effect" in text
    assert "report:" not in text                                                # report.enabled=false


@pytest.mark.parametrize("keys, expected", [
    (["data.num_workers"], ["num_workers"]),
    (["wandb.enabled", "report.enabled"], ["wandb.enabled", "report.enabled"]),
    (["data.num_workers", "wandb.enabled", "report.enabled"], ["num_workers", "wandb.enabled", "report.enabled"]),
    (["a.b.x", "c.b.x", "y"], ["a.b.x", "c.b.x", "y"]),
    (["b.y.x", "y.x", "z"], ["b.y.x", "y.x", "z"]),
    (["train.seq_len", "data.seq_len", "data.batch_size"], ["train.seq_len", "data.seq_len", "batch_size"]),
])
def test_short_keys_stay_unique(keys, expected):
    assert list(short_keys(keys).values()) == expected


def test_column_headers_and_labels_keep_what_tells_settings_apart(tmp_path):
    run = tmp_path / "r"
    cells = [(f"c{i}", {"workload.params.size": w, "data.image.size": r, "data.num_workers": 0}, steady(0.01 * (1 + i)))
             for i, (w, r) in enumerate([(1, 1), (2, 1), (1, 2)])]
    write_run(run, cells, repeats=2)
    data, analysis = analyze_run(run, AnalysisConfig(), n_resamples=50)
    header = results_table(data, analysis).splitlines()[0].split()
    assert header[:3] == ["params.size", "image.size", "num_workers"]
    labels = set(analysis.cells["cell"])
    assert "params.size=2 image.size=1 num_workers=0" in labels
    assert cell_label({"data.num_workers": 2}) == "num_workers=2"
    verdicts = tables.verdicts(analysis)[1]
    assert {row[0] for row in verdicts} == labels                             # the report's tables say the same


ONE_CELL = ["history.enabled=false", "report.enabled=false", "sweep.name=one", "wandb.enabled=false",
            "data.num_workers=2"]


def test_a_one_cell_run_names_only_measurement_settings(tmp_path):
    """Where the results go and what the run is called are no settings of the cell: the trial
    line, the final table and the verdicts name data.num_workers only (sweeper.schema.roles)."""
    from sweeper.plan import ClusterShape, plan_trials
    from sweeper.schema import DataConfig, TrialConfig

    trial = plan_trials([(ONE_CELL, TrialConfig(data=DataConfig(num_workers=2)))],
                        ClusterShape(node_cpus=[4.0], node_gpus=[0.0]))[0]
    # a record as the plan writes it, and one written before the plan knew the roles
    for swept in (trial.swept, {"history.enabled": False, "report.enabled": False, "sweep.name": "one",
                                "wandb.enabled": False, "data.num_workers": 2}):
        record = {"trial_id": "ccc-0", "status": "ok", "swept": swept, "summary": {"items_per_s": 10.0}}
        assert "  num_workers=2  10 items/s" in progress_line(1, 1, record, 1.0)
        assert "enabled" not in progress_line(1, 1, record, 1.0) and "name=" not in progress_line(1, 1, record, 1.0)
    run = tmp_path / "one"
    write_run(run, [("c0", {"history.enabled": False, "sweep.name": "one", "wandb.enabled": False,
                            "data.num_workers": 2}, steady(0.01))], repeats=3)
    data, analysis = analyze_run(run, AnalysisConfig(), n_resamples=50)
    assert analysis.axes == ("data.num_workers",) and list(analysis.cells["cell"]) == ["num_workers=2"]
    assert results_table(data, analysis).splitlines()[0].split()[0] == "num_workers"
    assert tables.verdicts(analysis)[1][0][0] == "num_workers=2"


def test_progress_line():
    record = {"trial_id": "ccc-0", "status": "ok", "swept": {"data.num_workers": 2},
              "summary": {"items_per_s": 10000.0, "step_p50_s": 0.003},
              "workload_spec": {"name": "dataloader", "items_label": "samples"}}
    assert progress_line(3, 12, record, 4.25) == \
        "[ 3/12] ok      ccc-0  num_workers=2  10,000 samples/s  p50 3.00 ms  (4.2 s)"
    del record["workload_spec"]                                  # a record of version 1 names no items
    assert "10,000 items/s" in progress_line(3, 12, record, 4.25)
    record["swept"] = {"data.image.size": 64, "workload.params.size": 8}      # two settings ending in "size"
    assert "  image.size=64 params.size=8  " in progress_line(3, 12, record, 4.25)
