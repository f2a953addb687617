"""The trial record: one typed, versioned contract; stored runs of older versions still load."""
import json
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweeper.record import RECORD_VERSION, TrialRecord, UnreadableRecord
from sweeper.results import SUMMARY_VERSION, load, read_records, summary_version, write_summary
from tests.conftest import ROOT

STORED = ROOT / "tests" / "data"


def test_stored_version_1_runs_load_as_they_are():
    for run in ("dataloader-r5", "sleepy-a"):
        records = read_records(STORED / run)
        assert records and all(r["record_version"] == 1 for r in records)
        summary, steps = load(STORED / run)
        assert len(summary) == len(records) and set(steps["trial_id"]) <= set(summary["trial_id"])


def test_a_record_of_an_unknown_version_is_refused_by_name(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(STORED / "sleepy-a", run)
    path = next((run / "trials").iterdir()) / "trial.json"
    values = json.loads(path.read_text())
    path.write_text(json.dumps({**values, "record_version": RECORD_VERSION + 1}))
    with pytest.raises(UnreadableRecord, match=f"record_version {RECORD_VERSION + 1}; this sweeper reads versions 1, 2"):
        read_records(run)


def test_a_record_round_trips_and_redacts_once(monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", "verysecretvalue")
    record = TrialRecord(trial_id="abc-0", overrides=["x=verysecretvalue"], error_message="verysecretvalue here")
    assert TrialRecord.from_dict(record.to_dict()) == record
    clean = record.redacted()
    assert clean.overrides == ["x=[redacted:MY_API_TOKEN]"] and "verysecretvalue" not in json.dumps(clean.to_dict())
    assert clean.record_version == RECORD_VERSION


def test_summary_carries_its_version_and_is_a_view_never_read_back(tmp_path):
    records = read_records(STORED / "sleepy-a")
    write_summary(tmp_path, records)
    assert summary_version(tmp_path / "summary.parquet") == SUMMARY_VERSION
    # a summary.parquet that disagrees with the records (older, newer, cut short) does not matter:
    # the rows come from the records, the durable truth
    pq.write_table(pa.Table.from_pandas(pd.DataFrame({"trial_id": ["x"]})), tmp_path / "summary.parquet")
    summary, _ = load(tmp_path, records)
    assert sorted(summary["trial_id"]) == sorted(r["trial_id"] for r in records)
    assert summary.set_index("trial_id").loc[records[0]["trial_id"], "started_at"] == records[0]["started_at"]
    assert not {"pitfalls", "overlap_saving"} & set(summary.columns)     # records know no analysis
