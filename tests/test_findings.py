"""The analysis' findings: overlap projection, pitfall warnings, cost per million, scaling efficiency.

Mostly pure tests over records built here (each pitfall fires on a case built to trigger it
and stays quiet on a clean one; cost columns against arithmetic written out), and one real
sweep of a toy workload with known phase times, read through summary.parquet, cells.parquet,
the terminal and report.md.
"""
from __future__ import annotations

import copy
import json
import math
import re
import textwrap

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import findings, pitfalls
from sweeper.analysis.overlap import loader_words, trial_overlap
from sweeper.analysis.cost import unpriced_line
from sweeper.analysis.recommend import format_recommendation
from sweeper.executors.local import gpu_models
from sweeper.results import summary_frame
from sweeper.analysis.run import analyze, cell_summary
from sweeper.errors import ConfigError
from sweeper.schema import AnalysisConfig, CostConfig, RootConfig

# --------------------------------------------------------------------------- records


def record(trial_id="aaa-0", cell_id="aaa", *, summary=None, figures=None, config=None, fingerprint=None,
           resources=None, swept=None, status="ok", is_baseline=False):
    return {"trial_id": trial_id, "cell_id": cell_id, "repeat": int(trial_id.rsplit("-", 1)[1]),
            "is_baseline": is_baseline, "status": status, "swept": swept or {},
            "resources": resources or {"num_cpus": 1, "num_gpus": 0}, "summary": summary or {},
            "figures": figures or {}, "config": config or {}, "fingerprint": fingerprint or {},
            "workload_spec": {"name": "toy", "items_label": "samples", "headline": [], "memory": "host_mem_gb"},
            "overrides": []}


# A trial of a loader feeding a step: 4 workers, 16 shards, 10 ms compute and 0.5 ms wait a step.
CLEAN = record(
    summary={"step_mean_s": 0.0105, "phase_data_wait_mean_s": 0.0005, "phase_forward_mean_s": 0.010,
             "data_wait_share": 0.0005 / 0.0105, "util_workers_cpu_pct_mean": 320.0},
    figures={"num_shards": 16, "sample_bytes": 4100, "pin_memory_effective": True,
             "mem_workers_uss_growth_mb_per_100_steps": 0.4, "mem_workers_uss_growth_r2": 0.1,
             "mem_workers_uss_growth_readings": 10, "loader": "dali", "dali_mem_peak_mb": 900.0,
             "dali_mem_after_release_mb": 100.0},
    config={"data": {"num_workers": 4, "prefetch_factor": 2, "batch_size": 32, "pin_memory": True},
            "probe": {"growth_mb_per_100_steps": 10.0}},
    fingerprint={"host_mem_gb": 64.0})


def with_changes(base, **sections):
    """A copy of `base` with dict sections updated ({"summary": {...}, "figures": {...}})."""
    out = copy.deepcopy(base)
    for section, values in sections.items():
        if isinstance(out[section], dict):
            for key, value in values.items():
                if isinstance(value, dict) and isinstance(out[section].get(key), dict):
                    out[section][key].update(value)
                else:
                    out[section][key] = value
        else:
            out[section] = values
    return out


TRIGGERS = {
    # 2 shards for 4 workers x 2 ranks
    "shards": {"figures": {"num_shards": 2}, "config": {"train": {"world_size": 2}}},
    # 8 workers x 4 prefetch x 32 x 4.1 MB = 4.2 GB in flight > 10% of a 16 GB host
    "pinned_memory": {"figures": {"sample_bytes": 4.1e6}, "config": {"data": {"num_workers": 8, "prefetch_factor": 4}},
                      "fingerprint": {"host_mem_gb": 16.0}},
    # 4 ms of a 14 ms step waiting for data, workers busy
    "data_wait": {"summary": {"step_mean_s": 0.014, "phase_data_wait_mean_s": 0.004, "data_wait_share": 0.004 / 0.014}},
    # +25 MB per 100 steps, a straight line
    "worker_memory": {"figures": {"mem_workers_uss_growth_mb_per_100_steps": 25.0, "mem_workers_uss_growth_r2": 0.97}},
    # 30% waiting while 4 workers use 60% of one core between them
    "prefetch": {"summary": {"data_wait_share": 0.30, "util_workers_cpu_pct_mean": 60.0}},
    # DALI held 880 of its 900 MB peak after release
    "dali_pool": {"figures": {"dali_mem_after_release_mb": 880.0}},
}


def test_a_clean_trial_has_no_pitfall():
    assert pitfalls.trial_pitfalls(CLEAN) == []


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_each_pitfall_fires_on_its_case_alone(code):
    found = pitfalls.trial_pitfalls(with_changes(CLEAN, **TRIGGERS[code]))
    assert [p.code for p in found if p.code != "data_wait"] == ([] if code == "data_wait" else [code])
    assert any(p.code == code for p in found)
    assert all(p.message for p in found)


def test_pitfall_messages_carry_the_measured_numbers():
    by_code = {code: pitfalls.trial_pitfalls(with_changes(CLEAN, **TRIGGERS[code])) for code in TRIGGERS}
    text = {code: next(p.message for p in found if p.code == code) for code, found in by_code.items()}
    assert "2 shard(s) for 4 worker(s) x 2 rank(s) = 8 readers" in text["shards"]
    assert "4.2 GB" in text["pinned_memory"] and "26% of the host's 16 GB" in text["pinned_memory"]
    assert "data wait is 29% of the step" in text["data_wait"]
    assert "+25.0 MB per 100 steps" in text["worker_memory"]
    assert "prefetch_factor=2" in text["prefetch"] and "busy 15% of a core each" in text["prefetch"]
    assert "kept 880 of its 900 MB" in text["dali_pool"]


def test_pitfalls_stay_quiet_just_inside_their_thresholds_and_without_inputs():
    edges = [
        {"figures": {"num_shards": 8}, "config": {"train": {"world_size": 2}}},                      # 8 = 4 x 2
        {"summary": {"step_mean_s": 0.010, "phase_data_wait_mean_s": 0.001, "data_wait_share": 0.099}},
        {"figures": {"mem_workers_uss_growth_mb_per_100_steps": 25.0, "mem_workers_uss_growth_r2": 0.5}},  # noisy
        {"summary": {"data_wait_share": 0.30, "util_workers_cpu_pct_mean": 200.0}},                  # workers busy
        {"figures": {"dali_mem_after_release_mb": 800.0}},                                           # 89% of peak
        {"figures": {"loader": "torch", "dali_mem_after_release_mb": 900.0}},                        # not DALI
        {"figures": {"sample_bytes": 4.1e6, "pin_memory_effective": False},
         "config": {"data": {"num_workers": 8, "prefetch_factor": 4}}, "fingerprint": {"host_mem_gb": 16.0}},
    ]
    for changes in edges:
        found = [p.code for p in pitfalls.trial_pitfalls(with_changes(CLEAN, **changes)) if p.code != "data_wait"]
        assert found == [], changes
    loader_only = copy.deepcopy(CLEAN)     # a loader-only trial (no compute phase) waits by design
    loader_only["summary"] = {"step_mean_s": 0.01, "phase_data_wait_mean_s": 0.01, "data_wait_share": 1.0,
                              "util_workers_cpu_pct_mean": 10.0}
    assert pitfalls.trial_pitfalls(loader_only) == []
    assert pitfalls.trial_pitfalls(with_changes(CLEAN, status="failed", figures={"num_shards": 1})) == []


# --------------------------------------------------------------------------- overlap


def test_overlap_of_known_phase_means():
    found = trial_overlap({"step_mean_s": 0.051, "phase_data_wait_mean_s": 0.015, "phase_h2d_mean_s": 0.005,
                           "phase_forward_mean_s": 0.010, "phase_backward_mean_s": 0.015,
                           "phase_optimizer_mean_s": 0.005})
    assert found["overlap_data_s"] == pytest.approx(0.020) and found["overlap_compute_s"] == pytest.approx(0.030)
    assert found["overlap_serial_s"] == pytest.approx(0.050) and found["overlap_ideal_s"] == pytest.approx(0.030)
    assert found["overlap_saving"] == pytest.approx(0.020 / 0.051)
    assert trial_overlap({"step_mean_s": 0.01, "phase_data_wait_mean_s": 0.01}) == {}   # loader only: no projection
    hidden = loader_words({"overlap_data_s": 0.0002, "overlap_compute_s": 0.03, "overlap_serial_s": 0.0302,
                           "overlap_ideal_s": 0.03, "overlap_saving": 0.0066, "mean": 0.0302}, 0.05)
    assert hidden.startswith("the loader is hidden")
    costly = loader_words({"overlap_data_s": 0.020, "overlap_compute_s": 0.03, "overlap_serial_s": 0.05,
                           "overlap_ideal_s": 0.03, "overlap_saving": 0.4, "mean": 0.05}, 0.05)
    assert costly.startswith("the loader costs 40% of the step") and "50.00 to 30.00 ms" in costly


# --------------------------------------------------------------------------- cost and scaling


def priced_run():
    """Three training cells at world size 1, 2 and 4 on H200s, three repeats each around a known
    throughput (their median)."""
    records = []
    for world, median_rate, memory in ((1, 100.0, 20.0), (2, 180.0, 14.0), (4, 300.0, 9.0)):
        for repeat, spread in enumerate((0.99, 1.0, 1.01)):
            samples_per_s = median_rate * spread
            records.append(record(
                f"w{world}-{repeat}", f"w{world}", is_baseline=world == 1, swept={"train.world_size": world},
                resources={"num_cpus": 4 * world, "num_gpus": world},
                summary={"items_per_s": samples_per_s, "step_mean_s": 16 * world / samples_per_s,
                         "step_p50_s": 16 * world / samples_per_s, "step_p95_s": 16 * world / samples_per_s,
                         "steps": 10},
                figures={"tokens_per_s": samples_per_s * 1024, "peak_gpu_mem_gb": memory},
                fingerprint={"gpu_name": "NVIDIA H200", "host_mem_gb": 2000.0}))
    for r in records:
        r["workload_spec"] = {"name": "train_step", "items_label": "samples", "memory": "gpu_mem_gb",
                              "headline": [["tokens_per_s", "tokens/s", 1.0, 0]]}
    return records


def analyse(records, cfg=None, cost=None):
    return analyze(summary_frame(records), pd.DataFrame(), cfg or AnalysisConfig(), n_resamples=50,
                   records=records, cost=cost)


def test_cost_per_million_tokens_is_the_hand_arithmetic():
    analysis = analyse(priced_run(), cost=CostConfig(gpu_hour_usd={"H200": 3.5, "A100": 1.0}))
    cells = analysis.cells.set_index("cell_id")
    # world size 2: 2 GPUs x $3.50 = $7.00 an hour; 180 samples/s x 1024 tokens = 184,320 tokens/s;
    # $7.00 / 3600 s = $0.0019444 a second; / 184,320 tokens/s x 1e6 = $0.010549 per million tokens
    assert cells.loc["w2", "usd_per_hour"] == pytest.approx(7.0)
    assert cells.loc["w2", "usd_per_m_tokens"] == pytest.approx(7.0 / 3600 / 184_320 * 1e6)
    assert cells.loc["w2", "usd_per_m_tokens"] == pytest.approx(0.010549, rel=1e-4)
    # world size 1: $3.50 / 3600 / 102,400 x 1e6 = $0.009494; world size 4: $14 / 3600 / 307,200 x 1e6 = $0.012659
    assert cells.loc["w1", "usd_per_m_tokens"] == pytest.approx(0.0094944, rel=1e-4)
    assert cells.loc["w4", "usd_per_m_tokens"] == pytest.approx(0.0126591, rel=1e-4)
    assert analysis.cost_column == "usd_per_m_tokens" and ("usd_per_m_tokens", "$/M tokens", 1.0, 4) in analysis.extra
    # the frame cells.parquet and the W&B summary Table are written from
    table = cell_summary(analysis).set_index("cell_id")
    assert table.loc["w2", "usd_per_m_tokens"] == pytest.approx(7.0 / 3600 / 184_320 * 1e6)


def test_an_unpriced_gpu_model_here_is_one_line_at_plan_time(tmp_path):
    for i, model in enumerate(("NVIDIA H200", "NVIDIA B200")):      # the driver's /proc files, as written
        (tmp_path / f"0000:0{i}:00.0").mkdir()
        (tmp_path / f"0000:0{i}:00.0" / "information").write_text(f"Model: \t\t {model}\nIRQ:   42\n")
    models = gpu_models(str(tmp_path))
    assert models == ["NVIDIA H200", "NVIDIA B200"]
    line = unpriced_line({"H200": 3.5}, models)
    assert line.startswith("cost.gpu_hour_usd has no price for this machine's GPU 'NVIDIA B200' (priced: H200)")
    assert unpriced_line({"H200": 3.5, "B200": 6.0}, models) is None and unpriced_line({}, models) is None
    assert gpu_models(str(tmp_path / "none")) == []


@pytest.mark.slow
def test_a_cpu_trial_without_a_cpu_price_is_one_line_before_any_trial(sweeper_cli):
    result = sweeper_cli(["dry_run=true", "+cost.gpu_hour_usd={H200:3.5}", "analysis.objective=cost"])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: 1 trial(s) run on CPUs only and cost.cpu_hour_usd is not set: they will have no cost "
        "(set cost.cpu_hour_usd=PRICE, USD per CPU-hour) (analysis.objective=cost)"]


def test_bad_prices_and_a_cost_objective_without_prices_fail_with_the_key():
    with pytest.raises(ConfigError, match=r"^analysis.objective: is cost but no price is set"):
        RootConfig(analysis=AnalysisConfig(objective="cost")).check()
    with pytest.raises(ConfigError, match=r"^cost.gpu_hour_usd.H200: must be a positive price"):
        RootConfig(cost=CostConfig(gpu_hour_usd={"H200": -1.0})).check()
    with pytest.raises(ConfigError, match=r"^analysis.max_memory_gb: must be positive"):
        AnalysisConfig(max_memory_gb=0).check()
    RootConfig(analysis=AnalysisConfig(objective="cost"), cost=CostConfig(cpu_hour_usd=0.05)).check()


def test_scaling_efficiency_is_per_rank_throughput_against_world_size_one():
    cells = analyse(priced_run()).cells.set_index("cell_id")
    # per rank: 100, 90, 75 samples/s -> 1.0, 0.9, 0.75
    assert list(cells.loc[["w1", "w2", "w4"], "items_per_s_per_rank"]) == pytest.approx([100.0, 90.0, 75.0])
    assert list(cells.loc[["w1", "w2", "w4"], "scaling_efficiency"]) == pytest.approx([1.0, 0.9, 0.75])


def test_cost_objective_picks_the_cheapest_cell_within_the_memory_limit():
    cfg = AnalysisConfig(objective="cost", max_memory_gb=16.0)
    analysis = analyse(priced_run(), cfg, CostConfig(gpu_hour_usd={"NVIDIA H200": 3.5}))
    rec = analysis.recommendation
    # w1 is cheapest per token but needs 20 GB; of w2 (14 GB) and w4 (9 GB), w2 costs less
    assert rec.cell_id == "w2" and rec.excluded == ["world_size=1"]
    assert rec.value == pytest.approx(7.0 / 3600 / 184_320 * 1e6)
    text = "\n".join(format_recommendation(rec))
    assert "max_memory_gb=16 GB" in text and "analysis.objective=cost" in text and "per million tokens" in text


def test_cpu_cost_of_a_known_step_is_2_50_a_million_samples():
    # 2 CPUs x $0.36 = $0.72 an hour = $0.0002 a second; 80 samples a second: $2.5e-6 a sample
    cpu = [record(f"c-{i}", "c", summary={"items_per_s": 80.0, "step_mean_s": 0.1, "steps": 5},
                  resources={"num_cpus": 2, "num_gpus": 0}) for i in (0, 1, 2)]
    cells = analyse(cpu, cost=CostConfig(cpu_hour_usd=0.36)).cells.set_index("cell_id")
    assert cells.loc["c", "usd_per_hour"] == pytest.approx(0.72)
    assert cells.loc["c", "usd_per_m_samples"] == pytest.approx(2.50)


def test_overlap_of_known_phase_means_saves_40_percent():
    # 40 ms waiting for data, then 60 ms of compute, one after the other: perfectly overlapped
    # the step would take 60 ms of its 100, so overlap could save 40 ms, 40% of the step
    found = trial_overlap({"step_mean_s": 0.100, "phase_data_wait_mean_s": 0.040, "phase_forward_mean_s": 0.060})
    assert found["overlap_serial_s"] == pytest.approx(0.100) and found["overlap_ideal_s"] == pytest.approx(0.060)
    assert found["overlap_saving"] == pytest.approx(0.40)


def test_unknown_gpu_model_and_missing_cpu_price_are_notes_not_costs():
    records = priced_run()
    for r in records[:3]:       # the world-size-1 cell ran on a GPU with no price
        r["fingerprint"]["gpu_name"] = "NVIDIA B200"
    analysis = analyse(records, cost=CostConfig(gpu_hour_usd={"H200": 3.5}))
    assert math.isnan(analysis.cells.set_index("cell_id").loc["w1", "usd_per_m_tokens"])
    assert any("no price in cost.gpu_hour_usd for GPU model 'NVIDIA B200'" in n for n in analysis.notes)
    cpu = [record(f"c-{i}", "c", summary={"items_per_s": 50.0 + i, "step_mean_s": 0.02, "steps": 5}) for i in (0, 1, 2)]
    cpu_analysis = analyse(cpu, cost=CostConfig(gpu_hour_usd={"H200": 3.5}))
    assert any("a CPU trial and no cost.cpu_hour_usd" in n for n in cpu_analysis.notes)
    assert "usd_per_m_samples" not in analyse(cpu).cells.columns        # no prices: no cost columns


# --------------------------------------------------------------------------- one real sweep

PHASED = '''
"""A toy step with known phase times: data_wait sleeps data_ms, forward sleeps compute_ms."""
import time
from dataclasses import dataclass
from sweeper.spec import Wants, WorkloadSpec


@dataclass
class Params:
    data_ms: float = 20.0
    compute_ms: float = 30.0


def run(cfg, probe):
    p = cfg.workload.params
    while probe.more(cfg.workload.steps):
        with probe.step(items=cfg.data.batch_size):
            with probe.phase("data_wait"):
                time.sleep(p["data_ms"] / 1e3)
            with probe.phase("forward"):
                time.sleep(p["compute_ms"] / 1e3)
    return {"num_shards": 2}


SPEC = WorkloadSpec(name="phased", params=Params, sections=("data",), items_label="samples",
                    resources=lambda cfg: Wants(cpus=1.0, gpus=0.0))
'''


@pytest.mark.slow
def test_a_sweep_of_known_phase_times(tmp_path, sweeper_cli):
    (tmp_path / "phased.py").write_text(textwrap.dedent(PHASED))
    result = sweeper_cli(["workload.target=phased:run", "+workload.params.data_ms=40.0,1.0",
                          "+workload.params.compute_ms=60.0", "workload.steps=10", "workload.warmup_steps=2",
                          "data.num_workers=4", "data.batch_size=8", "executor=local", "cost.cpu_hour_usd=0.36",
                          "probe.sample_hz=0"],
                         env_extra={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = next((tmp_path / "results" / "single").iterdir())
    summary = pd.read_parquet(run / "summary.parquet").set_index("workload.params.data_ms")
    cells = pd.read_parquet(run / "cells.parquet").set_index("workload.params.data_ms")
    slow = cells.loc[40.0]           # the analysis' figures (one repeat a cell: that trial's)
    # known phases: 40 ms data, 60 ms compute -> 100 ms measured, 60 ms overlapped, 40% saved
    # (sleep oversleeps by a millisecond or more on a loaded 2-core machine: 15% tolerance)
    assert slow["overlap_data_s"] == pytest.approx(0.040, rel=0.15)
    assert slow["overlap_compute_s"] == pytest.approx(0.060, rel=0.15)
    assert slow["overlap_serial_s"] == pytest.approx(0.100, rel=0.15)
    assert slow["overlap_ideal_s"] == pytest.approx(0.060, rel=0.15)
    assert slow["overlap_saving"] == pytest.approx(0.40, abs=0.05)
    assert cells.loc[1.0, "overlap_saving"] < 0.10          # 1 of 61 ms, give or take a loaded machine
    # pitfalls, per cell: 2 shards for 4 workers; 40% data wait; quiet on the 1 ms cell's wait
    assert set(slow["pitfalls"].split(";")) == {"shards", "data_wait"}
    assert cells.loc[1.0, "pitfalls"] == "shards"
    assert not {"pitfalls", "overlap_saving"} & set(summary.columns)    # the trial rows know no analysis
    # cost from the known step (the arithmetic itself: test_cpu_cost_of_a_known_step_is_2_50_a_million_samples):
    # the CPUs the trial held (isolation=node: the whole node's) x $0.36 an hour, 8 samples every 100 ms
    expected = summary.loc[40.0, "num_cpus"] * 0.36 / 3600 / (8 / 0.100) * 1e6
    assert cells.loc[40.0, "usd_per_m_samples"] == pytest.approx(expected, rel=0.15)
    out = result.stdout
    assert "$/M samples" in out and "warnings (docs/analysis.md#warnings):" in out
    assert "[data_wait] data wait is" in out and "of the step (over 10%)" in out
    assert "[shards] 2 shard(s) for 4 worker(s) x 1 rank(s)" in out
    # one repeat a cell: the recommendation keeps the baseline and says what its loader costs
    baseline = summary.index[summary["is_baseline"]][0]
    words = {40.0: r"the loader costs (3[5-9]|4[0-5])% of the step; perfect overlap would take data \+ compute from",
             1.0: r"the loader (is hidden: data phases take \d\.\d%|costs \d% of the step)"}[baseline]
    assert re.search(words, out), out[-2000:]
    trial = json.loads(next((run / "trials").glob("*/trial.json")).read_text())
    assert trial["config"]["data"]["num_workers"] == 4 and trial["fingerprint"]["host_mem_gb"] > 0
    report = (run / "report.md").read_text()
    assert "## Warnings" in report and "[shards]" in report and "## Overlap projection" in report
    assert "$/M samples" in report


# -- slow repeats: a busy machine's mark ---------------------------------------------------------
def _repeats(per_cell, spread, seed=0):
    """cell -> (repeats, items/s): log-normal repeats with this spread, trial ids CELL-R."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"trial_id": f"{cell}-{r}", "cell_id": cell,
                          "items_per_s": speed * math.exp(rng.normal(0.0, spread))}
                         for cell, (count, speed) in per_cell.items() for r in range(count)])


def test_a_repeat_far_below_its_cell_is_named_with_how_far_and_quiet_repeats_are_not():
    repeats = _repeats({"base": (4, 100.0), "a": (2, 100.0), "b": (2, 90.0)}, spread=0.01)
    assert findings.slow_repeat_notes(repeats) == []
    repeats.loc[repeats["trial_id"] == "base-1", "items_per_s"] *= 0.7       # one repeat under load
    notes = findings.slow_repeat_notes(repeats)
    assert len(notes) == 1 and "base-1 (3" in notes[0] and "a-" not in notes[0] and "quiet machine" in notes[0]
    assert list(findings.slow_repeats(repeats)["trial_id"]) == ["base-1"]


def test_a_noisy_workload_is_not_called_slow_for_its_own_spread_nor_a_fast_repeat():
    noisy = _repeats({"base": (10, 100.0), "a": (10, 80.0)}, spread=0.08, seed=3)   # 8% a repeat, symmetric
    assert findings.slow_repeats(noisy).empty
    fast = _repeats({"base": (4, 100.0), "a": (2, 100.0)}, spread=0.01)
    fast.loc[fast["trial_id"] == "base-2", "items_per_s"] *= 1.4            # faster: no machine does that by load
    assert findings.slow_repeats(fast).empty
    single = _repeats({"base": (1, 100.0), "a": (1, 60.0)}, spread=0.01)      # one repeat a cell: nothing to compare
    assert findings.slow_repeat_notes(single) == []
