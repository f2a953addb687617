"""benchmarks/figures.py, which the GPU sessions call for their tables and ratios, on synthetic
run folders with known answers: its figures come from the package's analysis, and one rule
decides "within x%"."""
import json
import re
import subprocess

import pytest

from benchmarks import figures
from tests.conftest import ROOT
from tests.synthetic_runs import steady, write_run

COPY_SPEC = {"name": "h2d_copy", "items_label": "MB", "headline": [["copy_gbps", "GB/s", 1.0, 1]], "memory": "host_mem_gb"}


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """The preset at 10 ms a step; a user's model 2% slower; another 25% slower (32 items a step)."""
    run = tmp_path_factory.mktemp("runs") / "train_step" / "r1"
    write_run(run, [("preset", {"train.model": None}, steady(0.0100, 0.005)),
                    ("user", {"train.model": "nanogpt_style:gpt"}, steady(0.0102, 0.005)),
                    ("slow", {"train.model": "slow:gpt"}, steady(0.0125, 0.005))], repeats=4)
    return run


def test_within_is_one_rule_for_every_ratio():
    assert figures.within(1.05, 0.05) and figures.within(0.95, 0.05)
    assert not figures.within(1.051, 0.05) and not figures.within(float("nan"), 0.05)
    assert figures.verdict(0.97, 0.03) == "ratio 0.970: WITHIN 3%"
    assert figures.ratio(1.0, 0.0) != figures.ratio(1.0, 0.0)      # no denominator: NaN, never within


def test_pair_gives_the_ratio_of_two_cells_from_the_analysis(model_run):
    line = figures.pair_text(model_run, "train.model", "nanogpt_style:gpt", "null", "p50", 0.03)
    user, preset, ratio = (float(x) for x in re.findall(r"=\S+ ([0-9.]+)|ratio ([0-9.]+)", line) for x in x if x)
    assert user == pytest.approx(0.0102, rel=0.01) and preset == pytest.approx(0.0100, rel=0.01)
    assert ratio == pytest.approx(1.02, abs=0.01) and line.endswith("WITHIN 3%")
    assert "NOT within 3%" in figures.pair_text(model_run, "train.model", "slow:gpt", "null", "p50", 0.03)


def test_cells_lists_each_cell_with_its_throughput_best_first(model_run):
    lines = figures.cells_text(model_run, ["items_per_s", "p50"]).splitlines()
    assert lines[0] == str(model_run) and lines[1].split()[:4] == ["cell", "status", "repeats", "failed"]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 3 and rows[-1][0] == "model=slow:gpt"
    throughput = sorted(float(r[-2].replace(",", "")) for r in rows)
    assert throughput == pytest.approx([32 / 0.0125, 32 / 0.0102, 32 / 0.0100], rel=0.01)


def test_plain_compares_every_repeat_with_the_plain_scripts_runs(tmp_path):
    (tmp_path / "p0.json").write_text("log line\n" + json.dumps({"runs": [[3150.0, 1], [3300.0, 2]]}))
    (tmp_path / "p1.json").write_text(json.dumps({"runs": [[3210.0, 1]]}))
    (tmp_path / "fast.json").write_text(json.dumps({"runs": [[4000.0, 1]]}))
    plain = [tmp_path / "p0.json", tmp_path / "p1.json"]
    assert figures.plain_values([*plain, tmp_path / "gone.json"]) == [3150.0, 3300.0, 3210.0]
    run = tmp_path / "dali_match" / "r1"
    write_run(run, [("dali", {"data.loader": "dali"}, steady(0.0100, 0.005))], repeats=2)   # 3,200 items/s
    line = figures.plain_text(plain, [run], "items_per_s", 0.05)
    assert line.startswith("plain: 3,210.0 (median of 3)  sweeper: ") and "(median of 4 repeats)" in line
    ours = float(line.split("sweeper: ")[1].split()[0].replace(",", ""))
    assert ours == pytest.approx(3200, rel=0.01) and line.endswith("WITHIN 5%")
    assert "ratio 0.80" in figures.plain_text([tmp_path / "fast.json"], [run], "items_per_s", 0.05)
    assert "NOT within 5%" in figures.plain_text([tmp_path / "fast.json"], [run], "items_per_s", 0.05)


def test_copy_compares_each_size_and_memory_kind_with_the_plain_loop(tmp_path):
    run = tmp_path / "single" / "r1"
    records = write_run(run, [("p8", {"workload.params.size_mb": 8.0, "workload.params.pinned": True}, steady(0.01)),
                              ("g8", {"workload.params.size_mb": 8.0, "workload.params.pinned": False}, steady(0.01))],
                        repeats=3, spec=COPY_SPEC)
    for record in records:                    # the workload's own figure, as h2d_copy reports it
        record["figures"]["copy_gbps"] = 50.0 if record["cell_id"] == "p8" else 6.0
        (run / "trials" / record["trial_id"] / "trial.json").write_text(json.dumps(record))
    plain = tmp_path / "plain-runs.jsonl"
    plain.write_text("\n".join(json.dumps({"8/pinned": p, "8/pageable": 6.5}) for p in (49.0, 51.0, 50.0)) + "\n")
    assert figures.copy_figures([run]) == {"8/pinned": [50.0], "8/pageable": [6.0]}
    text = figures.copy_text(plain, [run], 0.05).splitlines()
    assert text[0].split()[0] == "8/pageable" and "NOT within 5%" in text[0]      # 6.0 against 6.5
    assert text[1].split()[0] == "8/pinned" and "ratio 1.000: WITHIN 5%" in text[1]
    assert text[2] == "copy microbenchmark vs plain torch loop: worst difference 7.7% (FAIL: must be within 5%)"


@pytest.mark.slow
def test_every_gpu_session_parses_and_the_runner_names_them():
    sessions = sorted((ROOT / "benchmarks" / "sessions").glob("*.sh"))
    scripts = [ROOT / "benchmarks" / "gpu_session.sh", ROOT / "benchmarks" / "gpu_helpers.sh", *sessions]
    for script in scripts:
        checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{script}: {checked.stderr}"
    usage = subprocess.run(["bash", str(scripts[0]), "nope"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and all(s.stem in usage.stdout for s in sessions), usage.stdout
