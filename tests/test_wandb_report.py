"""The W&B report of a sweep, with the real wandb and wandb-workspaces and no network: the spec
a real sweep writes, the runs its run sets select, and `python -m sweeper.publish`."""
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("wandb")
wr = pytest.importorskip("wandb_workspaces.reports.v2")
from wandb_workspaces.reports.v2 import interface, internal  # noqa: E402

from sweeper import publish  # noqa: E402
from sweeper.analysis.recommend import format_recommendation  # noqa: E402
from sweeper.analysis.run import analyze_run, run_analysis_config  # noqa: E402
from sweeper.publishers import wandb_report, wandb_sink  # noqa: E402
from sweeper.report import markdown, tables  # noqa: E402
from sweeper.results import read_records  # noqa: E402
from tests.conftest import run_sweeper  # noqa: E402
from tests.test_wandb import read_wandb_records  # noqa: E402

COMMON = ["workload.target=tests.workloads_for_tests:quick", "workload.steps=5", "workload.warmup_steps=1",
          "executor=local", "wandb.enabled=true"]
GRID = {"sweep-a": [*COMMON, "+workload.params.sleep_s=0.001,0.002", "repeats=2"],
        "sweep-b": [*COMMON, "+workload.params.sleep_s=0.001", "repeats=1"]}     # one trial, of a cell sweep-a has too


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two real sweeps into one results folder and one W&B project, offline: sweep-a (2 cells,
    repeats=2: 6 trials), which the tests read, and sweep-b, whose runs sweep-a's run sets must
    leave out. The sweeper_cli fixture's runner, once for the module. {run_id: (run, stdout)}"""
    tmp = tmp_path_factory.mktemp("wbr")
    runs = {}
    for run_id, grid in GRID.items():
        result = run_sweeper(grid + [f"run_id={run_id}"], tmp)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        runs[run_id] = (tmp / "results" / "single" / run_id, result.stdout)
    return runs


@pytest.fixture(scope="module")
def sweeps(swept):
    return {run_id: run for run_id, (run, _) in swept.items()}


@pytest.mark.slow
def test_the_sweep_writes_its_report_and_a_wandb_run_per_trial_and_for_the_summary(swept):
    run, stdout = swept["sweep-a"]
    assert (run / "report.html").exists() and (run / "report.md").exists() and (run / "cells.parquet").exists()
    assert "recommendation:" in stdout and f"report: {run / 'report.html'}" in stdout
    trials = list((run / "trials").iterdir())
    assert len(trials) == 6                                               # 2 cells x 2, the baseline twice
    offline = list(run.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(offline) == len(trials) + 1                                # one per trial plus the summary


def offline_runs(run: Path):
    """Each offline run of a run folder as W&B holds it: id, group, job type, tags, config, summary."""
    out = []
    for path in sorted(run.glob("wandb/offline-run-*/run-*.wandb")):
        found = {"summary": {}}
        for record in read_wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                r = record.run
                found.update(id=r.run_id, group=r.run_group, job_type=r.job_type, tags=list(r.tags),
                             config={(u.nested_key[0] if u.nested_key else u.key): json.loads(u.value_json)
                                     for u in r.config.update})
            elif kind == "summary":
                found["summary"].update({(u.nested_key[0] if u.nested_key else u.key): json.loads(u.value_json)
                                         for u in record.summary.update})
        out.append(found)
    return out


def matches(filters: dict, run: dict) -> bool:
    """A W&B v2 run filter (the JSON the report holds) evaluated on one run; AND only."""
    assert filters["filterFormat"] == "filterV2"
    ok = True
    for item in filters["filters"]:
        assert item.get("connector", "AND") == "AND" and not item["disabled"]
        section, name = item["key"]["section"], item["key"]["name"]
        if section == "run":
            value = {"group": run["group"], "jobType": run["job_type"]}[name]
        else:
            assert section == "config"
            value = run["config"].get(name)
        op, wanted = item["op"], item["value"]
        ok &= {"=": value == wanted, "!=": value != wanted, "IN": value in wanted, "NIN": value not in wanted}[op]
    return ok


def spec_of(run: Path) -> dict:
    return json.loads((run / wandb_report.SPEC_FILE).read_text())


def runset_filters(spec: dict):
    """{run set name: its filters} of every panel grid in the spec."""
    return {rs["name"]: rs["filters"] for b in spec["spec"]["blocks"] if b.get("type") == "panel-grid"
            for rs in b["metadata"]["runSets"]}


def strip_ids(value):
    if isinstance(value, dict):
        return {k: strip_ids(v) for k, v in value.items() if k not in ("id", "__id__")}
    if isinstance(value, list):
        return [strip_ids(v) for v in value]
    return value


@pytest.mark.slow
def test_spec_round_trips_into_a_report_with_every_part(sweeps):
    run = sweeps["sweep-a"]
    text = (run / wandb_report.SPEC_FILE).read_text()
    model = internal.ReportViewspec.model_validate_json(text)
    report = wr.Report._from_model(model)
    assert report.project == "sweeper" and report.title == "single sweep-a"
    # the library's own model again, unchanged (run set and panel ids aside)
    again = json.loads(report._to_model().model_dump_json(by_alias=True, exclude_none=True))
    assert strip_ids(again) == strip_ids(json.loads(text))

    _, analysis = analyze_run(run, run_analysis_config(run))
    texts = "\n".join(b.text if isinstance(b.text, str) else str(b.text)
                      for b in report.blocks if isinstance(b, wr.MarkdownBlock))
    for line in format_recommendation(analysis.recommendation):      # the recommendation, as the analysis words it
        assert line in texts
    for line in markdown.table(tables.verdicts(analysis)):           # the verdict table of report.md
        assert line in texts
    assert tables.judged(analysis) in texts

    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    panels = [p for g in grids for p in g.panels]
    by_type = {}
    for p in panels:
        by_type.setdefault(type(p).__name__, []).append(p)
    table, = by_type["WeavePanelSummaryTable"]
    assert table.table_name == wandb_sink.VERDICTS_TABLE             # the summary run's Table
    bars = {p.title: p for p in by_type["BarPlot"]}
    throughput = bars[wandb_report.TITLES["throughput"].format(label="items")]
    assert [m.name for m in throughput.metrics] == ["items_per_s"]
    assert isinstance(throughput.groupby, wr.Config) and throughput.groupby.name == "cell_id"
    phases = bars[wandb_report.TITLES["phases"]]
    assert "phase_work_s" in [m.name for m in phases.metrics]
    line, = by_type["LinePlot"]
    assert [m.name for m in line.y] == ["step_s"] and line.groupby.name == "cell_id"
    parallel, = by_type["ParallelCoordinatesPlot"]
    assert [c.metric.name for c in parallel.columns] == [*analysis.axes, "items_per_s"]
    assert isinstance(parallel.columns[-1].metric, wr.SummaryMetric)
    scatter, = by_type["ScatterPlot"]
    assert (scatter.x.name, scatter.y.name) == (analysis.workload.memory, "items_per_s")
    assert len(by_type["RunComparer"]) == 1


@pytest.mark.slow
def test_run_sets_select_exactly_this_sweeps_runs(sweeps):
    a, b = sweeps["sweep-a"], sweeps["sweep-b"]
    runs_a, runs_b = offline_runs(a), offline_runs(b)
    records = read_records(a)
    trial_ids = {r["trackers"]["wandb"]["run_id"] for r in records}
    assert len(trial_ids) == len(records) == 6
    filters = runset_filters(spec_of(a))
    trials, summary = filters["trials of sweep-a"], filters["summary of sweep-a"]

    # the same project, both sweeps' runs: the trial run set picks exactly sweep-a's trial runs
    everything = runs_a + runs_b
    assert {r["id"] for r in everything if matches(trials, r)} == trial_ids
    assert {r["id"] for r in everything if matches(summary, r)} == {wandb_sink.run_id_for("single", "sweep-a", "summary")}
    assert not any(matches(trials, r) or matches(summary, r) for r in runs_b)
    assert {r["id"] for r in runs_b if matches(runset_filters(spec_of(b))["trials of sweep-b"], r)} == \
        {r["trackers"]["wandb"]["run_id"] for r in read_records(b)}


@pytest.mark.slow
def test_trial_runs_carry_the_records_ids_and_the_analysis_figures(sweeps):
    run = sweeps["sweep-a"]
    records = {r["trial_id"]: r for r in read_records(run)}
    _, analysis = analyze_run(run, run_analysis_config(run))
    repeats = analysis.repeats.set_index("trial_id")
    trial_runs = [r for r in offline_runs(run) if r["job_type"] != "summary"]
    assert len(trial_runs) == len(records)
    for wb in trial_runs:
        record = records[wb["config"]["trial_id"]]
        assert record["trackers"]["wandb"] == {"run_id": wb["id"], "url": None}     # offline: no URL yet
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", wb["id"])
        assert wb["group"] == "sweep-a" and wb["job_type"] == record["workload_spec"]["name"]
        assert f"cell:{record['cell_id']}" in wb["tags"] and ("baseline" in wb["tags"]) == record["is_baseline"]
        for axis in analysis.axes:                                   # the summary's flat dotted keys
            assert wb["config"][axis] == record["swept"][axis]
        assert wb["config"]["cell_id"] == record["cell_id"]
        for key in ("items_per_s", "p50", "p95"):                    # the analysis' figures of this repeat
            assert wb["summary"][key] == pytest.approx(repeats.loc[record["trial_id"], key], rel=1e-12)


def _snapshot(run: Path):
    return {str(p.relative_to(run)): (p.stat().st_mtime_ns, p.stat().st_size) for p in run.rglob("*")}


@pytest.mark.slow
def test_publish_without_a_key_says_so_once_and_changes_nothing(sweeps, tmp_path, capsys, monkeypatch):
    run = sweeps["sweep-a"]
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    before = _snapshot(run)
    assert publish.main([str(run)]) == publish.NOT_PUBLISHED == 3
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no W&B API key" in err
    assert _snapshot(run) == before


class FakeServer:
    """The GraphQL entry point of wandb-workspaces, answering as W&B would; records every call."""

    def __init__(self):
        self.calls = []

    def execute(self, api, query, variables=None):
        self.calls.append((query, dict(variables or {})))
        if "viewer" in query:
            return {"viewer": {"id": "u1", "entity": "team-x", "username": "me"}}
        if "ProjectInternalId" in query:
            return {"project": {"id": "p1", "internalId": "proj-internal-1"}}
        if "upsertView" in query:
            return {"upsertView": {"inserted": variables["id"] is None, "view": {
                "id": variables["id"] or "report-1", "name": variables["name"], "displayName": variables["displayName"],
                "description": variables["description"], "type": variables["type"],
                "project": {"id": "p1", "name": variables["projectName"], "entityName": variables["entityName"]},
                "spec": variables["spec"], "updatedAt": "2026-11-30T00:00:00"}}}
        raise AssertionError(f"unexpected query {query[:60]}")

    def saves(self):
        return [v for q, v in self.calls if "upsertView" in q]


@pytest.mark.slow
def test_publishing_twice_updates_one_report(sweeps, tmp_path, monkeypatch, capsys):
    import shutil
    from types import SimpleNamespace

    run = tmp_path / "run"
    shutil.copytree(sweeps["sweep-a"], run)
    server, synced = FakeServer(), []
    api = SimpleNamespace(client=SimpleNamespace(app_url="https://wandb.example"), projects=lambda entity: [],
                          create_project=lambda project, entity: None, default_entity="team-x")
    monkeypatch.setenv("WANDB_API_KEY", "fake-key-for-the-test")
    monkeypatch.setattr(interface, "execute_graphql", server.execute)
    monkeypatch.setattr(interface, "_get_api", lambda: api)
    monkeypatch.setattr(publish, "reachable", lambda: None)
    monkeypatch.setattr(publish, "sync_runs", lambda dirs, entity, project: synced.append((dirs, entity, project)))

    assert publish.main([str(run)]) == 0
    first = json.loads((run / publish.PUBLISHED_FILE).read_text())
    assert publish.main([str(run)]) == 0
    second = json.loads((run / publish.PUBLISHED_FILE).read_text())
    urls = capsys.readouterr().out.split()

    saves = server.saves()
    assert [s["id"] for s in saves] == [None, "report-1"]           # the second save targets the first's report
    assert first["report"]["id"] == second["report"]["id"] == "report-1"
    assert urls == [first["report"]["url"]] * 2 and urls[0].startswith("https://wandb.example/team-x/sweeper/reports/")
    assert set(second) == {"report", "summary_run", "trials", "published_at"}    # one report
    records = read_records(run)
    assert {t: v["run_id"] for t, v in second["trials"].items()} == \
        {r["trial_id"]: r["trackers"]["wandb"]["run_id"] for r in records}
    some = records[0]
    assert second["trials"][some["trial_id"]]["url"] == \
        f"https://wandb.ai/team-x/sweeper/runs/{some['trackers']['wandb']['run_id']}"
    # the runs were synced into the entity/project the report's run sets name
    assert len(synced) == 2 and synced[0][1:] == ("team-x", "sweeper") and len(synced[0][0]) == len(records) + 1
    spec = json.loads(saves[-1]["spec"])
    projects = [rs["project"] for b in spec["blocks"] if b.get("type") == "panel-grid"
                for rs in b["metadata"]["runSets"]]
    assert projects and all(p == {"name": "sweeper", "entityName": "team-x", "id": "proj-internal-1"}
                            for p in projects)


def test_tracker_names_a_deterministic_id_and_a_url_only_when_known(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    monkeypatch.delenv("WANDB_APP_URL", raising=False)
    record = read_records(Path(__file__).parent / "data" / "sleepy-a")[0]
    offline = wandb_sink.tracker(tmp_path, record, {"wandb": {"enabled": True, "mode": "offline"}})
    assert offline == {"run_id": f"sleepy-same-a-{record['trial_id']}", "url": None}
    assert wandb_sink.tracker(tmp_path, record, {"wandb": {"enabled": True, "mode": "offline"}}) == offline
    online = wandb_sink.tracker(tmp_path, record, {"wandb": {"enabled": True, "mode": "online", "entity": "team"}})
    assert online["url"] == f"https://wandb.ai/team/sweeper/runs/{offline['run_id']}"
    assert wandb_sink.tracker(tmp_path, record, {"wandb": {"enabled": True, "mode": "online"}})["url"] is None
    assert wandb_sink.tracker(tmp_path, record, {"wandb": {"enabled": False}}) is None
    long = wandb_sink.run_id_for("s" * 80, "r/1:2", "t")
    assert len(long) == 64 and re.fullmatch(r"[A-Za-z0-9_-]+", long)
