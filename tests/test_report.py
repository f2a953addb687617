"""report.md against a golden file, report.html self-contained and rendered by headless Chromium."""
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import sinks
from sweeper.report import analysis_config, write_report
from sweeper.sinks import report_sink

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden" / "dataloader-r5.report.md"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "dl-r5"
    shutil.copytree(DATA / "dataloader-r5", run)
    html_path, md_path = write_report(run)
    return run, html_path, md_path


def test_markdown_matches_golden(report):
    _, _, md_path = report
    if os.environ.get("SWEEPER_UPDATE_GOLDEN"):
        GOLDEN.write_text(md_path.read_text())
    assert md_path.read_text() == GOLDEN.read_text(), "report.md changed; SWEEPER_UPDATE_GOLDEN=1 rewrites it"


def test_figures_written_next_to_the_report(report):
    run, _, md_path = report
    names = sorted(p.name for p in (run / "report_figures").iterdir())
    assert names == ["heatmap.png", "memory.png", "phases.png", "steps.png"]
    for name in names:
        data = (run / "report_figures" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert f"](report_figures/{name})" in md_path.read_text()


def test_html_is_self_contained(report):
    _, html_path, _ = report
    html = html_path.read_text()
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.IGNORECASE)
    assert "url(" not in html and "@import" not in html
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,', html)) == 4
    assert "<td class=\"slower\">slower</td>" in html and "Recommendation" in html


def _saturated_pixels(png: bytes) -> int:
    """Pixels of clear colour (figures); the tables are black, grey and pale tints."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 80).sum())


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; CI installs it)")
def test_chromium_renders_the_report_offline(report, tmp_path):
    _, html_path, _ = report
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--host-resolver-rules=MAP * ~NOTFOUND",   # no network: anything external fails
              "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", f"--user-data-dir={tmp_path / 'p'}"]
    shot = tmp_path / "report.png"
    screenshot = subprocess.run(common + ["--window-size=1200,7000", f"--screenshot={shot}", html_path.as_uri()],
                                capture_output=True, text=True, timeout=120)
    dom = subprocess.run(common + ["--dump-dom", html_path.as_uri()], capture_output=True, text=True, timeout=120)
    assert screenshot.returncode == 0 and dom.returncode == 0, screenshot.stderr[-2000:] + dom.stderr[-2000:]
    console = [line for line in (screenshot.stderr + dom.stderr).splitlines()
               if ":CONSOLE" in line or "Uncaught" in line or "net::ERR" in line]
    assert console == [], console
    assert len(re.findall(r"<img [^>]*src=\"data:image/png;base64,", dom.stdout)) == 4
    assert dom.stdout.count("<table>") == 2 and "Sweep report: dataloader / dl-r5" in dom.stdout
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    assert _saturated_pixels(png) > 20_000    # the four figures drew (a broken image draws no colour)


def test_sink_writes_the_report_and_prints_verdicts(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    records = [{"trial_id": "x", "status": "ok"}]
    report_sink.on_sweep_end(run, records, {"report": {"enabled": False}})
    assert not (run / "report.html").exists()
    report_sink.on_sweep_end(run, records, {"report": {"enabled": True}, "analysis": {"metric": "p95"}})
    out = capsys.readouterr().out
    assert (run / "report.html").exists() and (run / "report.md").exists()
    assert "## Verdicts against the baseline" in out and "p95 ratio" in out and "## Cell statistics" not in out
    assert f"report: {run / 'report.html'}" in out
    assert report_sink.on_sweep_end in sinks.SWEEP_HOOKS


def test_analysis_config_from_root_dict_is_checked():
    cfg = analysis_config({"baseline": "data.batch_size=8", "metric": "p95", "heatmap": None,
                           "constraints": {"max_cpus": 4}})
    assert (cfg.metric, cfg.constraints.max_cpus, cfg.heatmap) == ("p95", 4, [])
    with pytest.raises(Exception, match="analysis.metric"):
        analysis_config({"metric": "p99"})


def test_report_cli_bad_input(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sweeper.report", str(tmp_path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1


@pytest.mark.slow
def test_a_sweep_writes_its_report_and_wandb_runs(sweeper_cli, tmp_path):
    result = sweeper_cli(["workload.target=tests.workloads_for_tests:sleepy", "+workload.params.sleep_s=0.001",
                          "data.batch_size=8,16", "workload.steps=10", "workload.warmup_steps=2", "repeats=2",
                          "wandb.enabled=true"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = next((tmp_path / "results" / "single").iterdir())
    assert (run / "report.html").exists() and (run / "report.md").exists()
    assert "## Recommendation" in result.stdout and f"report: {run / 'report.html'}" in result.stdout
    trials = list((run / "trials").iterdir())
    assert len(trials) == 6                                               # 2 cells x 2, the baseline twice
    offline = list(run.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(offline) == len(trials) + 1                                # one per trial plus the summary
