"""The morning report a reviewer reads in a minute, over a small history built in-process
(tests/morning_nights.py): regressions first, then each sweep's decisions and recommendation,
one compact trend row per cell, a full plot only for the cell that moved, and a first night
that says so in one line. One test renders the page in headless Chromium."""
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sweeper.analysis.model import ALONE, STOPPED
from sweeper.analysis.stats import FASTER, NO_CHANGE, SLOWER, within
from sweeper.history import detect, morning
from sweeper.history.night import Night
from sweeper.history.store import append_rows, decisions_of, read, rows_of_run
from sweeper.report.sparkline import sparkline
from tests import morning_nights as nights
from tests.test_report import CHROMIUM

DATA = Path(__file__).parent / "data"
IMG = r'<img [^>]*src="data:image/png;base64,'


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("morning") / "history"
    nights.build(path)
    return path


@pytest.fixture(scope="module")
def page(store) -> str:
    night = Night(nights.last_night_dirs(), title="overnight n5")
    return morning.render(read(store), night, detect.Settings())


def section(page: str, title: str) -> str:
    """The page from the <h2> that starts with `title` to the next <h2>."""
    return re.split(r"<h2>", page.split(f"<h2>{title}", 1)[1], maxsplit=1)[0]


def table_rows(html: str):
    """Each <tr> of the text as its cells' text (tags stripped)."""
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S) if "<td" in tr]


def test_regressions_and_outliers_come_first_then_the_sweeps_then_the_trends(page):
    headings = [re.sub(r" \(\d+\)$", "", h) for h in re.findall(r"<h2>([^<]+)</h2>", page)]
    assert headings == ["Regressions", "Outlier GPUs and nodes", "Sweeps of the night: decisions and recommendation",
                        "Trends per cell", "Cells that moved", "What changed since the night before", "Skipped"]
    regressions = table_rows(section(page, "Regressions"))
    assert {r[1] for r in regressions} == {nights.MOVED}          # items/s and p95 of the one cell that moved


def test_each_sweep_shows_its_decisions_baseline_first_and_its_recommendation(page):
    sweeps = section(page, "Sweeps of the night")
    nightly, fresh = sweeps.split("<h3>")[1:]
    assert nightly.startswith(f"nightly n5 on {nights.MACHINE}") and fresh.startswith("fresh n5")
    assert f'<li class="pick">{nights.NIGHTLY_REC}</li>' in nightly and "items/s / baseline (higher is faster)" in nightly
    rows = [r[:4] + r[-1:] for r in table_rows(nightly)]
    assert rows == [["workers=0", "baseline", "1.000", "-", "-"],
                    [nights.MOVED, FASTER, "1.300", "[1.274, 1.326]", "decided"],
                    [nights.NEW, within(0.05), "1.040", "[1.019, 1.061]", "at its maximum"],
                    ["workers=2", NO_CHANGE, "1.030", "[1.009, 1.051]", "decided"]]
    assert f"<p>1 {FASTER}, 1 {within(0.05)}, 1 {NO_CHANGE}</p>" in nightly
    assert f'<td class="within">{within(0.05)}</td>' in nightly
    assert "<th>interval</th>" in nightly and "<th>stopped</th>" in nightly      # repeats=auto's repeated interval
    assert [r[1] for r in table_rows(fresh)] == ["baseline", SLOWER] and "<th>stopped</th>" not in fresh   # fixed repeats
    assert "<th>95% CI</th>" in fresh
    assert f'<li class="pick">{nights.FRESH_REC}</li>' in fresh and "constraints: none" not in sweeps


def test_trends_are_one_compact_row_per_cell_with_history(page):
    trends = section(page, "Trends per cell")
    rows = table_rows(trends)
    assert [r[1] for r in rows] == [nights.MOVED, "workers=0", "workers=2"]   # alerted first; no cell new tonight
    assert trends.count('<svg class="spark"') == 3 and not re.search(IMG, trends)
    moved = rows[0]
    tonight, good, worse = (float(moved[i].replace(",", "").rstrip("x")) for i in (3, 5, 6))
    assert moved[4] == "n4" and abs(tonight - 1300) < 30 and abs(good - 2000) < 40 and abs(worse - 1.54) < 0.05
    assert moved[7].startswith(f"ALERT items/s {moved[6]} worse (significant")
    assert rows[2][7] == "" and rows[2][4] == "n4"                     # the quiet cell: its last good night, no alert
    assert "fresh on vm-0123456789: its first night, no history yet" in trends
    assert f"nightly on vm-0123456789: 1 cell(s) new tonight, no history yet: {nights.NEW}." in trends


def test_a_full_plot_only_for_the_cell_that_moved(page):
    moved = section(page, "Cells that moved")
    assert len(re.findall(IMG, page)) == 1 and len(re.findall(IMG, moved)) == 1
    assert f'alt="nightly: {nights.MOVED} (nightly-{nights.MOVED})' in moved


def test_a_first_night_has_no_plots_and_says_so_in_one_line(store, tmp_path):
    first = tmp_path / "history"
    append_rows(first, read(store).query("sweep == 'fresh'"))
    html = morning.render(read(first), Night(), detect.Settings())
    assert "<h2>Trends per cell (0)</h2>" in html and "<svg" not in html and not re.search(IMG, html)
    assert html.count("no history yet") == 1 and "<h2>Cells that moved (0)</h2>" in html
    assert "<p>No cell moved: no full-size plot.</p>" in html


def test_a_run_appended_before_the_store_kept_decisions_says_where_they_are(store, tmp_path):
    old = tmp_path / "history"
    rows = read(store).query("sweep == 'fresh'")
    append_rows(old, rows.assign(verdict=None, verdict_ratio=None, recommendation=None))
    html = morning.render(read(old), Night(), detect.Settings())
    assert "no decisions in the history store for this run" in section(html, "Sweeps of the night")


def test_cells_alone_in_their_stratum_are_one_line_not_a_table_of_dashes(store, tmp_path):
    """A run of microbenchmarks: each cell the only one of its stratum, no verdict to show."""
    path = tmp_path / "history"
    rows = read(store).query("sweep == 'fresh'")
    append_rows(path, rows.assign(verdict=ALONE, stratum=rows["cell"], recommendation=""))
    run = section(morning.render(read(path), Night(), detect.Settings()), "Sweeps of the night")
    assert "<table" not in run and "2 cell(s) alone in their stratum, nothing to compare them with" in run
    assert run.rstrip().endswith("(their own comparisons are in its report.html): batch_size=16, batch_size=8</p>")
    assert "<ul" not in run                                     # no recommendation: no empty list


def test_the_store_keeps_the_analysis_decisions_and_recommendation(tmp_path):
    """A real run's rows carry each cell's verdict and the recommendation as the Analysis gave them."""
    from sweeper.analysis.recommend import recommendation_lines
    from sweeper.analysis.run import analyze_run, run_analysis_config

    run = Path(shutil.copytree(DATA / "sleepy-a", tmp_path / "sleepy" / "same-a"))
    data, analysis = analyze_run(run, run_analysis_config(run), n_resamples=200)
    append_rows(tmp_path / "h", rows_of_run(run, data, analysis))
    stored = read(tmp_path / "h").set_index("cell_id")
    verdicts = analysis.verdicts.set_index("cell_id")
    assert stored["verdict"].to_dict() == verdicts["verdict"].to_dict()
    assert stored["verdict_ratio"].round(6).to_dict() == verdicts[f"{analysis.metric}_ratio"].round(6).to_dict()
    assert set(stored["recommendation"]) == {"\n".join(recommendation_lines(analysis))}
    assert "recommended:" in stored["recommendation"].iloc[0]
    assert stored["stopped"].isna().all()                       # fixed repeats: no cell stopped early
    why = ["" if b else "at its maximum" for b in analysis.verdicts["verdict"] == "baseline"]
    auto = dataclasses.replace(analysis, verdicts=analysis.verdicts.assign(**{STOPPED: why}))
    assert [d["stopped"] for d in decisions_of(auto).values()] == why


def test_sparkline_is_drawn_from_zero_with_alerted_nights_red():
    svg = sparkline([10.0, float("nan"), 10.0, 5.0], marked=[3], title="a <cell>")
    assert svg.startswith('<svg class="spark"') and "<title>a &lt;cell&gt;</title>" in svg
    assert 'points="3.0,3.0 79.0,3.0 117.0,14.0"' in svg          # the missing night skipped; 5 is half of 10
    assert svg.count('fill="#d7301f"') == 1 and 'cx="117.0" cy="14.0" r="2.5" fill="#d7301f"' in svg


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; CI installs it)")
def test_chromium_renders_the_morning_report_short_with_its_sparklines(store, tmp_path):
    """The page as a browser builds it: the inline SVG parsed as SVG (not text), one image, nothing
    fetched; and the whole report, drawn 1280 px wide, ends within two screens."""
    from PIL import Image, ImageChops

    html = morning.write_morning(store, tmp_path / "morning.html", run_dirs=nights.last_night_dirs())
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
              f"--user-data-dir={tmp_path / 'p'}"]
    shot = tmp_path / "morning.png"
    done = subprocess.run(common + ["--window-size=1280,6000", f"--screenshot={shot}", html.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = subprocess.run(common + ["--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and dom.returncode == 0, done.stderr[-2000:] + dom.stderr[-2000:]
    assert not [line for line in (done.stderr + dom.stderr).splitlines() if "net::ERR" in line]
    assert dom.stdout.count('<svg class="spark"') == 3 and dom.stdout.count("<polyline") == 3
    assert "&lt;svg" not in dom.stdout and len(re.findall(IMG, dom.stdout)) == 1
    assert f"<td class=\"faster\">{FASTER}</td>" in dom.stdout
    image = Image.open(shot).convert("RGB")
    content = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    assert content is not None and 1000 < content[3] < 2 * 1080, content    # drawn, and short
