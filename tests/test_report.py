"""report.md against a golden file, report.html self-contained and rendered by headless Chromium,
and every view of one Analysis printing the same figures."""
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper import publishers
from sweeper.analysis.run import analysis_config, analyze_run
from sweeper.publishers import report_sink
from sweeper.publishers.cells_files import write_cells
from sweeper.report import write_report
from sweeper.schema import AnalysisConfig

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden" / "dataloader-r5.report.md"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = {"resources": {"isolation": "node"}, "report": {"enabled": True}}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A copy of a real run, analysed once (today's defaults: throughput); report, cells files
    and the terminal's text all made from that one Analysis."""
    run = tmp_path_factory.mktemp("runs") / "dl-r5"
    shutil.copytree(DATA / "dataloader-r5", run)
    data, analysis = analyze_run(run, AnalysisConfig())
    html_path, md_path = write_report(run, data, analysis)
    write_cells(run, analysis)
    terminal = publishers.terminal_end(publishers.SweepEnd(run, data, analysis, ROOT))
    return run, html_path, md_path, terminal


def test_markdown_matches_golden(report):
    md_path = report[2]
    if os.environ.get("SWEEPER_UPDATE_GOLDEN"):
        GOLDEN.write_text(md_path.read_text())
    assert md_path.read_text() == GOLDEN.read_text(), "report.md changed; SWEEPER_UPDATE_GOLDEN=1 rewrites it"


# --------------------------------------------------------------------------- one figure per cell, everywhere


def _number(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


def _text_table(text: str, first_header: str):
    """{first column: {header: cell}} of a terminal table that starts with `first_header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    widths = [len(dashes) for dashes in lines[start + 1].split("  ")]
    rows = []
    for line in lines[start + 2:]:
        if "  " not in line.strip():        # the table's end: a blank line or the footer's sentences
            break
        cells, pos = [], 0
        for width in widths:
            cells.append(line[pos:pos + width].strip())
            pos += width + 2
        if not cells[0]:
            break
        rows.append(cells)
    header = [h.strip() for h, _ in zip(re.split(r"\s{2,}", lines[start].strip()), widths)]
    return header, rows


def _markdown_table(markdown: str, section: str):
    lines = markdown.split(f"## {section}")[1].split("\n## ")[0].splitlines()
    table = [line for line in lines if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    return {row[0].replace(" (baseline)", ""): dict(zip(header, row))
            for row in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}


def test_the_same_cell_shows_the_same_figures_everywhere(report):
    """The terminal's final table, its verdict table, report.md's two tables and
    cells.parquet / cells.csv: one figure per cell and column, from the one Analysis."""
    run, _, md_path, terminal = report
    cells = pd.read_parquet(run / "cells.parquet").set_index("cell")
    assert {"items_per_s_low", "p50_high", "throughput_ratio_low", "p50_ratio_high", "p95_verdict",
            "time_to_first_batch_s", "host_mem_gb"} <= set(cells.columns)
    assert pd.read_csv(run / "cells.csv").set_index("cell")["items_per_s"].to_dict() == \
        pytest.approx(cells["items_per_s"].to_dict())
    header, rows = _text_table(terminal, "num_workers")
    final = {row[-1]: dict(zip(header, row)) for row in rows}                 # by cell id
    verdict_header, verdict_rows = _text_table(terminal, "cell ")
    terminal_verdicts = {row[0]: dict(zip(verdict_header, row)) for row in verdict_rows}
    markdown = md_path.read_text()
    md_verdicts = _markdown_table(markdown, "Verdicts against the baseline")
    md_statistics = _markdown_table(markdown, "Cell statistics")
    assert len(final) == len(cells) == len(md_verdicts) == len(md_statistics) == 4
    for label, cell in cells.iterrows():
        for column, scale, digits in (("items/s", 1.0, 0), ("p50 ms", 1e3, 2), ("p95 ms", 1e3, 2)):
            key = {"items/s": "items_per_s", "p50 ms": "p50", "p95 ms": "p95"}[column]
            shown = {final[cell["cell_id"]][column], terminal_verdicts[label][column], md_verdicts[label][column],
                     md_statistics[label][column].split(" [")[0]}
            assert len(shown) == 1, (label, column, shown)                   # the same text in every view
            assert _number(shown.pop()) == pytest.approx(cell[key] * scale, abs=0.51 * 10 ** -digits), (label, column)
        assert _number(final[cell["cell_id"]]["first batch s"]) == pytest.approx(cell["time_to_first_batch_s"],
                                                                                 abs=5e-4)
        assert terminal_verdicts[label]["verdict"] == md_verdicts[label]["verdict"] == cell["verdict"]
        assert _number(md_verdicts[label]["throughput ratio"]) == pytest.approx(cell["throughput_ratio"], abs=5e-4)
    # the ratio is the cell's figure over the baseline's
    base = cells[cells["is_baseline"]].iloc[0]
    assert (cells["items_per_s"] / base["items_per_s"]).to_numpy() == pytest.approx(cells["throughput_ratio"])


def test_figures_written_next_to_the_report(report):
    run, _, md_path, _ = report
    names = sorted(p.name for p in (run / "report_figures").iterdir())
    assert names == ["heatmap.png", "memory.png", "phases.png", "steps.png"]
    for name in names:
        data = (run / "report_figures" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert f"](report_figures/{name})" in md_path.read_text()


def test_html_is_self_contained(report):
    html = report[1].read_text()
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


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; CI installs it)")
def test_chromium_renders_the_report_offline(report, tmp_path):
    html_path = report[1]
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


# --------------------------------------------------------------------------- the sweep-end publishers


def test_sweep_end_publishers_and_the_terminal(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    data, analysis = analyze_run(run, analysis_config({"metric": "p95"}), n_resamples=200)
    off = {"resources": {"isolation": "pack"}, "report": {"enabled": False}, "wandb": {"enabled": False},
           "history": {"dir": str(tmp_path / "history")}}
    end = publishers.on_sweep_end(run, data, analysis, off)
    assert (run / "cells.parquet").exists() and (run / "cells.csv").exists()
    assert not (run / "report.html").exists()
    assert "report:" not in publishers.terminal_end(end)
    on = {**off, "report": {"enabled": True}}
    text = publishers.terminal_end(publishers.on_sweep_end(run, data, analysis, on))
    assert (run / "report.html").exists() and (run / "report.md").exists()
    assert text.startswith("batch_size  items/s  p50 ms  p95 ms  status  cell")
    assert "isolation: pack" in text and f"results: {run}" in text
    assert "verdicts against the baseline:" in text and "p95 ratio" in text.split("verdicts against")[1]
    assert "judged on: p95 step time" in text and "recommendation:" in text
    assert text.splitlines()[-2:] == [f"report: {run / 'report.html'}", f"history: appended to {tmp_path / 'history'}"]
    assert "## " not in text                                               # not report.md read back
    assert report_sink.on_sweep_end in publishers.SWEEP_PUBLISHERS


def test_analysis_config_from_root_dict_is_checked():
    cfg = analysis_config({"baseline": "data.batch_size=8", "metric": "p95", "heatmap": None,
                           "constraints": {"max_cpus": 4}})
    assert (cfg.metric, cfg.constraints.max_cpus, cfg.heatmap) == ("p95", 4, [])
    assert analysis_config({}).metric == "throughput"
    with pytest.raises(Exception, match="analysis.metric"):
        analysis_config({"metric": "p99"})


@pytest.mark.slow
def test_report_cli_analyses_the_run_once_and_writes_everything(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    result = subprocess.run([sys.executable, "-m", "sweeper.report", str(run), "--metric", "p50"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| cell | repeats | items/s | p50 ms | p95 ms | p50 ratio |" in result.stdout
    assert result.stdout.rstrip().endswith(f"report: {run / 'report.html'}")
    assert (run / "cells.parquet").exists() and (run / "report.md").exists()


@pytest.mark.slow
def test_report_cli_bad_input(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sweeper.report", str(tmp_path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1


# A real sweep's report.html, report.md, cells and W&B runs: tests/test_wandb_report.py (its sweep-a).


def test_report_md_and_html_hold_the_same_sections_in_the_same_order():
    """Both are views of one list of sections (sweeper/report/sections.py): every section a run
    can have, filled, comes out under the same heading, in the same order, with the same lines."""
    import re
    from html import unescape

    from sweeper.report import FigureOut, Report, html, markdown

    t = (["cell", "verdict", "outlier"], [["a", "faster", "OUTLIER"]])
    report = Report(title="s / r", facts=["fact"], verdicts=t, noise_floor="floor one\nfloor two",
                    recommendation=["pick a"], notes=["a note"], statistics=t, failures=t,
                    figures=[FigureOut("steps", "Steps", None, "no steps")], pitfalls=["a warning"],
                    overlap=t, scaling=t, fleet=t, regressions=["a regression"], pairs=["a / b"])
    md, page = markdown.render(report), html.render(report)
    md_titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert md_titles == [unescape(h) for h in re.findall(r"<h2>([^<]+)</h2>", page)]
    assert len(md_titles) == 12 and md_titles[0] == report.verdicts_title and md_titles[-1].startswith("Each micro")
    for line in ["floor one", "floor two", "pick a", "a note", "a warning", "a regression", "a / b", "no steps"]:
        assert line in md and line in page
    assert '<td class="OUTLIER">OUTLIER</td>' in page and '<td class="faster">faster</td>' in page
