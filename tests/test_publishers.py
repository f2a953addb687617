"""The sweep's end hands one Analysis and the history's alerts to every view; a view that raises
is one line and starves no other. In-process, on a copy of a real run: well under a second each."""
import shutil
from pathlib import Path

import pytest

from sweeper import history, publishers
from sweeper.analysis.run import analyze_run
from sweeper.history.detect import Alert
from sweeper.results import read_records
from sweeper.schema import AnalysisConfig

DATA = Path(__file__).parent / "data"
ALERT = Alert(machine="h", sweep="same-a", cell_id="c1", cell="batch_size=16", metric="throughput", run_id="r2",
              date="2026-12-01", value=80.0, baseline_run="r1", baseline_value=100.0, ratio=1.25, p_value=0.01,
              verdict="slower", since="r2", evidence="significant")
QUIET = {"report": {"enabled": False}, "wandb": {"enabled": False}, "mlflow": {"enabled": False}}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    run = tmp_path_factory.mktemp("pub") / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    return (run, *analyze_run(run, AnalysisConfig(), n_resamples=50))


def broken(end):
    raise OSError("disk full")


def test_a_publisher_that_raises_starves_no_other(analysed, monkeypatch, capsys):
    run, data, analysis = analysed
    recorded = history.Recorded(run.parent / "store", (ALERT,))
    monkeypatch.setattr(history, "record_run", lambda *args: recorded)
    seen = []

    def before(end):
        seen.append(("before", end.analysis, end.history))

    def after(end):
        seen.append(("after", end.analysis, end.history))
        return "after's note"
    monkeypatch.setattr(publishers, "SWEEP_PUBLISHERS", [before, broken, after])
    end = publishers.on_sweep_end(run, data, analysis, QUIET)
    assert [name for name, *_ in seen] == ["before", "after"]
    assert all(got is analysis and alerts is recorded for _, got, alerts in seen)    # the same data, not files
    line = "output tests.test_publishers.broken failed: OSError: disk full"
    assert capsys.readouterr().err.splitlines() == [f"warning: {line}"]
    assert history.read_recorded(run)["notes"] == [line, "after's note"]     # the night's record keeps both
    assert publishers.terminal_end(end).splitlines()[-2:] == [f"history: appended to {recorded.store}",
                                                             f"  REGRESSION {ALERT.line()}"]


def test_a_history_that_fails_is_one_line_and_the_views_still_get_the_analysis(analysed, monkeypatch, capsys):
    run, data, analysis = analysed

    def store_gone(*args):
        raise PermissionError("history store is read-only")
    seen = []
    monkeypatch.setattr(history, "record_run", store_gone)
    monkeypatch.setattr(publishers, "SWEEP_PUBLISHERS", [lambda end: seen.append((end.analysis, end.history))])
    publishers.on_sweep_end(run, data, analysis, QUIET)
    assert seen == [(analysis, None)]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith("failed: PermissionError: history store is read-only")


def test_the_shipped_views_run_after_one_that_raises(analysed, tmp_path, monkeypatch, capsys):
    run, data, analysis = analysed
    (run / "cells.parquet").unlink(missing_ok=True)
    monkeypatch.setattr(publishers, "SWEEP_PUBLISHERS", [broken, *publishers.SWEEP_PUBLISHERS])
    end = publishers.on_sweep_end(run, data, analysis, {**QUIET, "history": {"dir": str(tmp_path / "store")}})
    assert (run / "cells.parquet").exists()                        # cells_files came after the broken one
    assert end.history is not None and end.history.store == tmp_path / "store"
    assert "disk full" in capsys.readouterr().err


def test_the_end_of_a_sweep_analyses_the_records_it_is_given_not_the_folder(analysed, tmp_path):
    run = analysed[0]
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    records = read_records(copy)
    for record in records:                                         # the folder no longer holds any record
        (copy / "trials" / record["trial_id"] / "trial.json").unlink()
    text = publishers.end_of_sweep(copy, records, {**QUIET, "history": {"enabled": False}}, AnalysisConfig())
    assert "recommended: batch_size=16" in text and (copy / "cells.parquet").exists()


def test_the_history_refuses_a_run_from_mismatched_machines_unless_told_to_mix(analysed, tmp_path):
    run, data, analysis = analysed
    records = [dict(r) for r in data.records]
    records[-1] = {**records[-1], "fingerprint": {**records[-1]["fingerprint"], "gpu_name": "NVIDIA H200"}}
    mixed = type(data)(data.path, data.summary, data.steps, records)
    root = {"history": {"dir": str(tmp_path / "store")}}
    refused = history.record_run(run, mixed, analysis, root)
    assert refused.line.startswith(f"history: not appended to {tmp_path / 'store'}: its trials ran on different "
                                   f"machines: trial {records[-1]['trial_id']} ran on a different setup")
    assert "gpu_name None vs 'NVIDIA H200'" in refused.line and "history.mix_machines=true" in refused.line
    assert refused.alerts == ()
    assert not (tmp_path / "store").exists()
    appended = history.record_run(run, mixed, analysis, {"history": {**root["history"], "mix_machines": True}})
    assert appended.line == f"history: appended to {tmp_path / 'store'}" and len(history.read(tmp_path / "store")) == 2


def test_a_missing_wandb_workspaces_is_one_plain_line_on_stderr(analysed, tmp_path, monkeypatch, capsys):
    import sys

    from sweeper.publishers import wandb_report

    run, data, analysis = analysed
    monkeypatch.setitem(sys.modules, "wandb_workspaces.reports.v2", None)      # import -> ImportError
    root = {"wandb": {"enabled": True, "mode": "offline", "entity": "e", "project": "p"}}
    assert wandb_report.on_sweep_end(publishers.SweepEnd(tmp_path, data, analysis, root)) is None
    assert capsys.readouterr().err == ("note: wandb-workspaces is not installed: no W&B report spec "
                                       "(pip install wandb-workspaces)\n")
    assert not (tmp_path / wandb_report.SPEC_FILE).exists()


def test_history_append_refuses_a_run_from_mismatched_machines_unless_mixed(analysed, tmp_path, capsys):
    import json

    from sweeper.history import __main__ as cli

    run = tmp_path / "run"
    shutil.copytree(analysed[0], run)
    path = sorted((run / "trials").glob("*/trial.json"))[-1]
    record = json.loads(path.read_text())
    record["fingerprint"]["torch"] = "9.9.9"
    path.write_text(json.dumps(record))
    store = tmp_path / "store"
    assert cli.main(["--store", str(store), "append", str(run)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"not appended: its trials ran on different machines: trial {record['trial_id']}" in err[0]
    assert "torch" in err[0] and "'9.9.9'" in err[0] and not store.exists()
    assert cli.main(["--store", str(store), "append", "--mix-machines", str(run)]) == 0
    assert f"{run}: history: appended to {store}" in capsys.readouterr().out


def test_the_night_check_reads_each_runs_record_and_the_morning_report_gets_its_notes(analysed, tmp_path):
    """The overnight suite's hook, in-process: the alerts each sweep's end recorded beside its run
    (the one file read back, by sweeper/history/night.py) and morning.html with the runs' notes."""
    from sweeper.history import morning

    night = tmp_path / "night"
    run = night / "same-a" / "n1"
    shutil.copytree(analysed[0], run)
    store = tmp_path / "store"
    history.append_run(store, run)
    history.write_recorded(run, history.Recorded(store, (ALERT,), f"history: appended to {store}"),
                           ["W&B alert skipped: wandb.mode=offline (an alert needs a live online run)"])
    manifest = {"suite": "overnight", "night": "n1", "sweeps": [{"name": "same-a", "run": "same-a/n1", "status": "ok"}]}
    assert morning.night_end(night, manifest) == [ALERT.to_dict()]
    page = (night / morning.MORNING).read_text()
    assert "<h1>Morning report: overnight n1</h1>" in page
    assert "W&amp;B alert skipped: wandb.mode=offline" in page


def test_a_night_that_appended_nothing_says_the_morning_report_is_not_written(tmp_path, capsys):
    """Every sweep of the night failed (a full disk) or history is off: a plain line, not a failure."""
    from sweeper.history import morning

    night = tmp_path / "night"
    night.mkdir()
    manifest = {"suite": "overnight", "night": "n1", "sweeps": [{"name": "a", "run": "a/n1", "status": "disk full"}]}
    assert morning.night_end(night, manifest) == []
    out = capsys.readouterr().out
    assert out.startswith("morning report: not written: ") and "holds no runs" in out and "warning" not in out
    assert not (night / morning.MORNING).exists()


def test_the_report_shows_the_regressions_the_history_handed_it(analysed, tmp_path):
    from sweeper.publishers import report_sink

    run = tmp_path / "run"
    shutil.copytree(analysed[0], run)
    end = publishers.SweepEnd(run, analysed[1], analysed[2], {"report": {"enabled": True}},
                              history.Recorded(tmp_path / "store", (ALERT,)))
    report_sink.on_sweep_end(end)
    md = (run / "report.md").read_text()
    assert f"## Regressions across nights (1)\n\n- {ALERT.line()}\n" in md
    assert "Regressions across nights (1)</h2>" in (run / "report.html").read_text()
