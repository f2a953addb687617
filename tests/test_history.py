"""History across nights, from real result files: one real sweep (executor=local), then nights
derived from it (each repeat's step times scaled, a day apart), appended to real stores.

- a step of +30% time from night 3 on: alerts and the change point on night 3 and after, nothing before;
- 20 nights of noise only: at most one false alarm, the measured rate printed;
- the CLI's list / trend / diff / alerts, the Prometheus gauges, the morning report in Chromium.
"""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from sweeper import history
from sweeper.history import __main__ as cli
from sweeper.history import detect, morning
from sweeper.history.store import read
from sweeper import publishers
from sweeper.publishers import wandb_sink
from tests.conftest import ROOT, run_sweeper
from tests.history_nights import derive_night
from tests.test_report import CHROMIUM

GRID = ["workload.target=tests.workloads_for_tests:quick", "+workload.params.sleep_s=0.001,0.002", "repeats=4",
        "workload.steps=8", "workload.warmup_steps=1", "executor=local", "report.enabled=false", "run_id=night00"]
SHIFT_NIGHT, NIGHTS, SLOWER = 3, 6, 1.3
NEW_DRIVER = {"driver": "999.1", "packages": {"torch": "9.9.9"}}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """One real sweep (2 cells, 4 and 8 repeats); the sweep-end publisher appends it to results/history."""
    tmp = tmp_path_factory.mktemp("hist")
    result = run_sweeper(GRID, tmp)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().splitlines()[-1].startswith("history: appended to"), result.stdout[-2000:]   # last, after the tables
    return tmp / "results" / "single" / "night00", tmp / "results" / "history"


@pytest.fixture(scope="module")
def shifted(real, tmp_path_factory):
    """Nights 1-5 derived from the real run (2% noise per repeat, 4% per night); from night 3 on
    every step takes 30% longer, and night 3 also brings a new driver and torch."""
    run, store = real
    rng = np.random.default_rng(1)
    folder = tmp_path_factory.mktemp("shifted") / "single"
    for night in range(1, NIGHTS):
        scale = SLOWER if night >= SHIFT_NIGHT else 1.0
        derived = derive_night(run, folder / f"night{night:02d}", night, scale, rng, noise=0.02, night_noise=0.04,
                               fingerprint=NEW_DRIVER if night >= SHIFT_NIGHT else None)
        history.append_run(store, derived)
    return store, folder


def flagged(assessed, column):
    return sorted(set(assessed.loc[assessed[column], "run_id"]))


@pytest.mark.slow
def test_the_sweep_end_appended_the_analysis_figures(real):
    from sweeper.analysis.run import analyze_run, run_analysis_config

    run, store = real
    rows = read(store)
    assert len(rows) == 2 and set(rows["run_id"]) == {"night00"}
    _, analysis = analyze_run(run, run_analysis_config(run))
    cells = analysis.cells.set_index("cell_id")
    for row in rows.itertuples():        # the one Analysis' figures, stored, not recomputed
        assert row.items_per_s == pytest.approx(cells.loc[row.cell_id, "items_per_s"])
        assert row.p95 == pytest.approx(cells.loc[row.cell_id, "p95"])
        assert len(row.repeat_items_per_s) == cells.loc[row.cell_id, "repeats"] in (4, 8)
    written = history.read_recorded(run)          # the record the overnight suite reads
    assert written["alerts"] == [] and written["store"] == str(store)


@pytest.mark.slow
def test_a_shift_is_found_on_its_night_and_nothing_before(shifted):
    store, _ = shifted
    assessed = detect.assess(read(store))
    night = f"night{SHIFT_NIGHT:02d}"
    after = [f"night{n:02d}" for n in range(SHIFT_NIGHT, NIGHTS)]
    assert flagged(assessed, "alert") == after          # every slow night against the last good one
    assert flagged(assessed, "step") == [night]         # the change point: the night it started
    shift_rows = assessed[assessed["run_id"] == night]
    assert len(shift_rows) == 4 and shift_rows["alert"].all() and shift_rows["step"].all()
    assert (shift_rows["baseline_run"] == "night02").all() and (shift_rows["ratio"] > 1.15).all()
    assert shift_rows["evidence"].str.contains("change point").all()     # asv's step backs each alert
    assert (assessed.loc[~assessed["alert"], "evidence"] == "").all()
    latest = history.alerts(store)                      # the overnight suite's call: the latest night
    assert {(a.run_id, a.since, a.baseline_run) for a in latest} == {(f"night{NIGHTS - 1:02d}", night, "night02")}
    assert {(a.cell, a.metric) for a in latest} == {(c, m) for c in ("sleep_s=0.001", "sleep_s=0.002")
                                                    for m in ("throughput", "p95")}


@pytest.mark.slow
def test_noise_alone_over_20_nights_raises_at_most_one_false_alarm(real, tmp_path):
    run, _ = real
    store, rng = tmp_path / "history", np.random.default_rng(7)
    for night in range(20):
        history.append_run(store, derive_night(run, tmp_path / "single" / f"n{night:02d}", night, 1.0, rng,
                                               noise=0.02, night_noise=0.04))
    assessed = detect.assess(read(store))
    tested = assessed[assessed["baseline_run"] != ""]
    alarms, steps = int(tested["alert"].sum()), int(assessed["step"].sum())
    significant = int((tested["verdict"] == "slower").sum())
    print(f"\nnoise only, 20 nights x 2 cells x 2 metrics: {alarms} alert(s) in {len(tested)} night tests "
          f"(rate {alarms / len(tested):.2%}), {steps} change point(s); the test alone said slower "
          f"{significant} time(s) ({significant / len(tested):.1%}): the ratio gate holds those back")
    assert len(tested) == 76
    assert alarms <= 1 and steps <= 1


def run_cli(capsys, *args):
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_lists_trends_and_diffs_nights(shifted, capsys):
    store, _ = shifted
    code, out, _ = run_cli(capsys, "--store", str(store), "list")
    assert code == 0
    assert re.findall(r"^\S+\s+single\s+(night\d\d)\s", out, re.M) == [f"night{n:02d}" for n in range(NIGHTS)]
    code, out, _ = run_cli(capsys, "--store", str(store), "trend", "--metric", "p95", "--cell", "sleep_s=0.002")
    lines = [line for line in out.splitlines() if line.startswith("sleep_s=0.002")]
    assert code == 0 and len(lines) == NIGHTS and "p95 ms" in out
    assert [("step" in line, "ALERT" in line) for line in lines] == \
        [(n == SHIFT_NIGHT, n >= SHIFT_NIGHT) for n in range(NIGHTS)]
    code, out, _ = run_cli(capsys, "--store", str(store), "diff", "night02", "night03")
    assert code == 0
    assert re.search(r"^\s*driver\s+-\s+999\.1$", out, re.M)          # a CPU host: no driver before
    assert re.search(r"^\s*package torch\s+\S+\s+9\.9\.9$", out, re.M)
    figures = re.search(r"^sleep_s=0\.001 .*$", out.split("figures")[1], re.M).group(0).split()
    assert 1 / float(figures[3]) == pytest.approx(SLOWER, rel=0.1)     # items/s after / before
    code, out, _ = run_cli(capsys, "--store", str(store), "alerts")
    assert code == 1 and out.startswith("4 regression(s)")


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--store", "{store}", "diff", "night02", "night99"], "no run 'night99' in the history store"),
    (["--store", "{store}", "trend", "--metric", "p42"], "argument --metric: invalid choice: 'p42'"),
    (["--store", "{store}", "--alert-ratio", "0.9", "alerts"], "--alert-ratio must be above 1"),
    (["--store", "{missing}", "list"], "no history store there"),
    (["--store", "{store}", "append", "{missing}"], "is not a run folder"),
])
def test_cli_bad_arguments_are_one_line_and_exit_2(shifted, tmp_path, capsys, args, message):
    store, _ = shifted
    args = [a.format(store=store, missing=tmp_path / "nothing") for a in args]
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


@pytest.mark.slow
def test_append_of_an_old_run_from_the_shell_and_twice_is_once(real, tmp_path, capsys):
    run, _ = real
    store = tmp_path / "store"
    result = subprocess.run([sys.executable, "-m", "sweeper.history", "--store", str(store), "append", str(run)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == f"{run}: history: appended to {store} (1 file(s))\n", result.stderr
    code, _, _ = run_cli(capsys, "--store", str(store), "append", str(run))          # again, in-process
    assert code == 0
    assert len(list(store.rglob("*.parquet"))) == 2 and len(read(store)) == 2    # two files, one run


@pytest.mark.slow
def test_prometheus_gauges_per_cell(shifted):
    from prometheus_client import CollectorRegistry, generate_latest

    from sweeper.exporters.prometheus import HistoryCollector

    store, _ = shifted
    registry = CollectorRegistry()
    registry.register(HistoryCollector(store))
    text = generate_latest(registry).decode()
    alerts = re.findall(r'^sweeper_history_alert\{([^}]*)\} (\S+)$', text, re.M)
    assert len(alerts) == 4 and all(value == "1.0" for _, value in alerts)
    assert all('run="night05"' in labels and 'sweep="single"' in labels for labels, _ in alerts)
    ratios = [float(v) for v in re.findall(r'^sweeper_history_ratio\{[^}]*metric="throughput"[^}]*\} (\S+)$', text, re.M)]
    assert len(ratios) == 2 and all(r > 1.15 for r in ratios)


@pytest.mark.slow
def test_exporter_refuses_a_missing_history_store(real, tmp_path, capsys):
    from sweeper.exporters.prometheus import main

    run, _ = real
    assert main([str(run), "--history", str(tmp_path / "none")]) == 2
    assert "--history" in capsys.readouterr().err


def test_wandb_alert_is_skipped_offline_with_a_note():
    found = [detect.Alert("m", "s", "c", "cell", "p95", "r", "d", 2.0, "b", 1.0, 2.0, 0.01, "slower", "r", "significant")]
    end = publishers.SweepEnd(None, None, None, {"wandb": {"enabled": True, "mode": "offline"}},
                              history.Recorded("store", tuple(found)))
    note = wandb_sink.alert(end)
    assert note == "W&B alert skipped: wandb.mode=offline (an alert needs a live online run)"


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; CI installs it)")
def test_morning_report_opens_in_chromium(shifted, tmp_path):
    store, folder = shifted
    html = morning.write_morning(store, tmp_path / "morning.html", run_dirs=[folder / "night05"])
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
                          f"--user-data-dir={tmp_path / 'p'}", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    headings = re.findall(r"<h2>([^<(]+)", page)
    assert [h.strip() for h in headings] == ["Regressions", "Outlier GPUs and nodes",
                                             "Sweeps of the night: decisions and recommendation", "Trends per cell",
                                             "Cells that moved", "What changed since the night before", "Skipped"]
    assert "<h2>Regressions (4)</h2>" in page and page.count("night02") >= 4
    assert page.count('<svg class="spark"') == 2 and "recommended: " in page      # a compact row per cell
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', page)) == 2     # both cells moved: a plot each
    assert "single night05 against night04: no fingerprint changed." in page


@pytest.mark.slow
def test_sweep_end_on_a_regressed_night_notes_skipped_wandb_alert_and_feeds_the_wandb_report(shifted, monkeypatch):
    """The sweep's end as the driver calls it, on the last slow night: the history records the run
    and hands its alerts to the views as data; the W&B alert is skipped offline (a note, kept in
    the run's record for the night), and the W&B report holds the block across nights."""
    wr = pytest.importorskip("wandb_workspaces.reports.v2")
    from sweeper.analysis.run import analyze_run, run_analysis_config
    from sweeper.publishers import wandb_report

    store, folder = shifted
    run = folder / f"night{NIGHTS - 1:02d}"
    data, analysis = analyze_run(run, run_analysis_config(run))
    monkeypatch.setattr(publishers, "SWEEP_PUBLISHERS", [wandb_sink.alert])       # no W&B runs written here
    off = folder.parent / "off"
    assert publishers.on_sweep_end(run, data, analysis, {"history": {"enabled": False, "dir": str(off)}}).history is None
    assert not off.exists()                                          # history.enabled=false: nothing appended
    root = {"results_dir": str(folder.parent), "history": {"dir": str(store)},
            "wandb": {"enabled": True, "mode": "offline", "project": "p", "entity": "e"}}
    end = publishers.on_sweep_end(run, data, analysis, root)
    assert len(end.history.alerts) == 4 and {a.since for a in end.history.alerts} == {f"night{SHIFT_NIGHT:02d}"}
    written = history.read_recorded(run)
    assert [a["cell_id"] for a in written["alerts"]] == [a.cell_id for a in end.history.alerts]
    assert written["notes"] == ["W&B alert skipped: wandb.mode=offline (an alert needs a live online run)"]
    report = wandb_report.build_report(data, analysis, {"entity": "e", "project": "p"}, end.history.lines())
    titles = [b.text for b in report.blocks if isinstance(b, wr.H2)]
    assert "Regressions across nights (4)" in titles


# -- a real overnight suite, shortened: two nights on this CPU, the second slowed ---------------
NIGHTLY = """# @package _global_
sweep:
  name: nightly
workload:
  target: tests.workloads_for_tests:sleepy
  steps: 6
  warmup_steps: 1
data:
  batch_size: 4
hydra:
  sweeper:
    params:
      +workload.params.sleep_s: 0.004,0.008
"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; CI installs it)")
def test_a_real_overnight_suite_exits_3_on_a_regression_and_its_morning_report_opens_in_chromium(tmp_path):
    """`+sweep=overnight` as cron starts it (its shipped regression check, sweeper.history's), twice:
    a quiet night, then one whose trials sleep twice as long (SWEEPER_TEST_SLOWDOWN: same cells)."""
    import os

    from sweeper import exitcodes

    (tmp_path / "conf" / "sweep").mkdir(parents=True)
    (tmp_path / "conf" / "sweep" / "nightly.yaml").write_text(NIGHTLY)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWEEPER_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    results = tmp_path / "results"
    codes = {}
    for night, slowdown in (("n1", "1"), ("n2", "2")):
        cmd = [sys.executable, "-m", "sweeper", "+sweep=overnight", "overnight.sweeps=[nightly]", f"run_id={night}",
               f"results_dir={results}", f"overnight.lock_file={tmp_path / 'lock'}", "overnight.budget_s=300",
               "repeats=4", "executor=local", "wandb.enabled=false", "report.enabled=false"]
        done = subprocess.run(cmd, cwd=tmp_path, env={**env, "SWEEPER_TEST_SLOWDOWN": slowdown},
                              capture_output=True, text=True, timeout=240)
        codes[night] = done.returncode
        assert (results / "overnight" / night / "morning.html").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    assert codes == {"n1": exitcodes.OK, "n2": exitcodes.REGRESSED}, done.stdout[-3000:]
    manifest = json.loads((results / "overnight" / "n2" / "night.json").read_text())
    assert {a["run_id"] for a in manifest["alerts"]} == {"n2"} and {a["baseline_run"] for a in manifest["alerts"]} == {"n1"}
    assert {a["metric"] for a in manifest["alerts"]} >= {"throughput"}
    assert len(read(results / "history")) == 4             # both nights, in the store of the suite's results_dir
    page = results / "overnight" / "n2" / "morning.html"
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
                          f"--user-data-dir={tmp_path / 'p'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>Morning report: overnight n2</h1>" in dom.stdout
    assert f"<h2>Regressions ({len(manifest['alerts'])})</h2>" in dom.stdout and "Skipped (0)" in dom.stdout
    assert "no sweep of the night compared its devices" in dom.stdout
    assert "no settings changed" in dom.stdout          # the suite's deadline is when, not what
    moved = {a["cell_id"] for a in manifest["alerts"]}
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom.stdout)) == len(moved)   # only cells that moved
    assert dom.stdout.count('<svg class="spark"') == 2 and "recommended: " in dom.stdout


@pytest.mark.slow
def test_morning_report_of_a_night_folder_lists_outliers_and_what_was_skipped(shifted, tmp_path):
    """A night.json as the suite writes it (one sweep ran with trials cut, one never started) over
    the shifted nights' last run, whose fleet.parquet flags one GPU."""
    import pandas as pd

    store, folder = shifted
    night = folder.parent
    manifest = {"manifest_version": 1, "suite": "overnight", "night": "night05", "sweeps_planned": ["single", "train_step"],
                "sweeps": [{"name": "single", "run": "single/night05", "status": "ok",
                            "skipped_trials": [{"trial_id": "727761531157-9", "overrides": ["+workload.params.sleep_s=0.001"]}]},
                           {"name": "train_step", "run": None, "status": "skipped", "skipped_trials": []}]}
    (night / "night.json").write_text(json.dumps(manifest))
    fleet = pd.DataFrame([{"cell_id": "727761531157", "device": "GPU-aaaa", "node": "n0", "ratio": 0.81, "outlier": True,
                           "sm_clock_mhz": 1410.0, "temp_c": 87.0, "power_w": 690.0},
                          {"cell_id": "727761531157", "device": "GPU-bbbb", "node": "n0", "ratio": 1.0, "outlier": False,
                           "sm_clock_mhz": 1980.0, "temp_c": 61.0, "power_w": 700.0}])
    fleet.to_parquet(folder / "night05" / morning.FLEET_FILE)
    code = cli.main(["--store", str(store), "morning", "--night", str(night), "--out", str(tmp_path / "m.html")])
    page = (tmp_path / "m.html").read_text()
    assert code == 0 and "<h1>Morning report: overnight night05</h1>" in page
    outliers = page.split("<h2>Outlier GPUs and nodes (1)</h2>")[1].split("<h2>")[0]
    assert "GPU-aaaa" in outliers and "GPU-bbbb" not in outliers and "1,410" in outliers and "87" in outliers
    skipped = page.split("<h2>Skipped (2)</h2>")[1].split("<h2>")[0]
    assert "trial 727761531157-9 +workload.params.sleep_s=0.001" in skipped
    assert "train_step" in skipped and "the budget ran out first" in skipped
    assert page.index("Regressions (4)") < page.index("Outlier GPUs") < page.index("Trends per cell")


def test_the_terminal_ends_with_the_store_and_a_regression_line_per_alert(tmp_path):
    from sweeper.history.detect import Alert
    from sweeper.publishers.terminal import history_lines

    alert = Alert(machine="h", sweep="dataloader", cell_id="c1", cell="num_workers=4", metric="throughput",
                  run_id="night03", date="2026-12-01", value=80.0, baseline_run="night02", baseline_value=100.0,
                  ratio=1.25, p_value=0.01, verdict="slower", since="night03", evidence="significant")
    assert history_lines(None) == []                                           # nothing appended: no line
    lines = history_lines(history.Recorded("/s", (alert,)))
    assert lines[0] == "history: appended to /s"
    assert lines[1:] == [f"  REGRESSION {alert.line()}"] and "1.25x worse than night02" in lines[1]


def test_the_record_beside_a_run_reads_back_also_from_before_its_lines(tmp_path):
    alert = detect.Alert("m", "s", "c", "cell", "p95", "r", "d", 2.0, "b", 1.0, 2.0, 0.01, "slower", "r", "significant")
    history.write_recorded(tmp_path, history.Recorded(tmp_path / "store", (alert,), "history: appended to s"), ["n"])
    assert history.read_recorded(tmp_path) == {"store": str(tmp_path / "store"), "line": "history: appended to s",
                                               "alerts": [alert.to_dict()], "lines": [alert.line()], "notes": ["n"]}
    (tmp_path / history.ALERTS_FILE).write_text(json.dumps({"store": "/s", "alerts": [alert.to_dict()]}))
    assert history.read_recorded(tmp_path)["lines"] == [alert.line()]       # as written before "lines" was
