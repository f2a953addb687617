"""The Prometheus exporter: started on a free local port, scraped once, stopped; the alert rule
checked by promtool against what the exporter served."""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from sweeper.analysis.run import analyze_run, run_analysis_config

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent
RULE = ROOT / "docs" / "prometheus-alert.yml"
SERVED = DATA / "dataloader-r5"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_line(process, text: str, timeout: float) -> str:
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen.append(line)
        if text in line:
            return line
        if process.poll() is not None:
            break
    raise AssertionError(f"exporter did not say {text!r}: {''.join(seen)}")


@pytest.fixture(scope="module")
def scraped():
    """(metric families, text) of one scrape of the exporter serving a real run."""
    from prometheus_client.parser import text_string_to_metric_families

    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "sweeper.exporters.prometheus", str(SERVED),
                                "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        _wait_for_line(process, f"http://127.0.0.1:{port}/metrics", timeout=30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
    finally:
        process.terminate()
        process.wait(timeout=10)
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def test_a_sweep_folder_serves_its_newest_run(tmp_path):
    import os

    from sweeper.exporters.prometheus import latest_run

    for age, name in ((200, "old"), (100, "new")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.parquet").write_bytes(b"")
        os.utime(tmp_path / name / "summary.parquet", (time.time() - age, time.time() - age))
    (tmp_path / "half-written").mkdir()
    assert latest_run(tmp_path) == tmp_path / "new"
    assert latest_run(tmp_path / "old") == tmp_path / "old"
    assert latest_run(tmp_path / "half-written") is None


@pytest.mark.slow
def test_serves_the_analysis_figures_per_cell_and_the_baseline(scraped):
    families, _ = scraped
    run = SERVED
    _, analysis = analyze_run(run, run_analysis_config(run), n_resamples=10)
    expected = analysis.cells.set_index("cell_id")               # what the report and cells.parquet show
    samples = families["sweeper_cell_step_seconds"].samples
    assert {s.labels["run"] for s in samples} == {run.name}      # the folder's name
    got = {(s.labels["cell_id"], s.labels["quantile"]): s.value for s in samples}
    assert len(got) == 2 * len(expected)
    rates = {s.labels["cell_id"]: s.value for s in families["sweeper_cell_items_per_second"].samples}
    for cell_id, row in expected.iterrows():
        assert got[(cell_id, "0.5")] == pytest.approx(row["p50"])
        assert got[(cell_id, "0.95")] == pytest.approx(row["p95"])
        assert rates[cell_id] == pytest.approx(row["items_per_s"])
    assert {s.labels["cell"] for s in samples} == set(expected["cell"])
    baseline = analysis.baseline_id
    base = {s.labels["quantile"]: s.value for s in families["sweeper_baseline_step_seconds"].samples}
    assert base == {"0.5": pytest.approx(expected.loc[baseline, "p50"]),
                    "0.95": pytest.approx(expected.loc[baseline, "p95"])}
    base_rate = families["sweeper_baseline_items_per_second"].samples
    assert [s.value for s in base_rate] == [pytest.approx(expected.loc[baseline, "items_per_s"])]
    repeats = {s.labels["cell_id"]: s.value for s in families["sweeper_cell_repeats"].samples}
    assert repeats[baseline] == 2 * min(repeats.values())          # the baseline runs twice as often


def test_a_scrape_analyses_the_folder_again_only_when_it_changed(tmp_path, monkeypatch):
    from sweeper.exporters import prometheus

    run = tmp_path / "sleepy" / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    calls = []
    real = prometheus.analyze
    monkeypatch.setattr(prometheus, "analyze", lambda path: calls.append(path) or real(path, n_resamples=10))
    collector = prometheus.RunCollector(run.parent)
    first = collector.current()[1]
    assert collector.current()[1] is first and len(calls) == 1           # unchanged: the same Analysis
    (run / "trials" / ".staging-x").mkdir()                    # the driver starts writing a trial folder
    os.utime(run / "trials", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert collector.current()[1] is not first and len(calls) == 2
    assert "sweeper_cell_items_per_second" in [f.name for f in collector.describe()]


@pytest.mark.slow
def test_bad_folder_exits_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sweeper.exporters.prometheus", str(tmp_path)],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2 and "no run with a summary.parquet" in result.stderr


def test_alert_rule_is_the_documented_guardrail():
    rule = yaml.safe_load(RULE.read_text())["groups"][0]["rules"][0]
    assert rule["alert"] == "SweeperP95AboveBaseline"
    assert 'quantile="0.95"' in rule["expr"] and "> 1.15" in rule["expr"]


def _series(families, name):
    return [(s.labels, s.value) for s in families[name].samples]


def _selector(name, labels):
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_alert_fires_on_what_the_exporter_serves(scraped, tmp_path):
    families, _ = scraped
    cells = _series(families, "sweeper_cell_step_seconds")
    base = {labels["quantile"]: value for labels, value in _series(families, "sweeper_baseline_step_seconds")}
    series = [{"series": _selector(name, labels), "values": f"{value}x15"}
              for name in ("sweeper_cell_step_seconds", "sweeper_baseline_step_seconds")
              for labels, value in _series(families, name)]
    firing = [(labels, value / base["0.95"]) for labels, value in cells
              if labels["quantile"] == "0.95" and value / base["0.95"] > 1.15]
    assert firing, "the data should hold a cell above the baseline x 1.15"
    expected = [{"exp_labels": {**labels, "severity": "warning"},
                 "exp_annotations": {
                     "summary": f"p95 step time of {labels['cell']} is above the baseline's x 1.15",
                     "description": f"Sweep {labels['sweep']}, run {labels['run']}: cell {labels['cell']} "
                                    f"({labels['cell_id']}) has a p95 step time {ratio:.2f} x the baseline cell's "
                                    f"(allowed: 1.15 x)."}}
                for labels, ratio in firing]
    test = {"rule_files": [str(RULE)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": "10m", "alertname": "SweeperP95AboveBaseline",
                                            "exp_alerts": expected}]}]}
    path = tmp_path / "alert_test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    check = subprocess.run(["promtool", "check", "rules", str(RULE)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    result = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
