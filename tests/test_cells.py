"""sweeper.analysis.cells and .recommend: synthetic frames with known answers, then a real run."""
import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import recommend, stats
from sweeper.analysis.cells import cell_table, trial_memory
from sweeper.analysis.load import load_run, normalise
from sweeper.analysis.repeats import repeat_table
from sweeper.analysis.run import analyze, analyze_run
from sweeper.results import load
from sweeper.schema import AnalysisConfig, ConstraintsConfig
from tests.synthetic_runs import LOADER_SPEC, loader_run, steady, write_run

DATA = Path(__file__).parent / "data"


def _summary(cell_values, axis="data.num_workers", baseline="c0", extra=None):
    """A summary frame: {cell_id: [per-repeat p50]}; p95 = 2 x p50; the axis value is the cell's index."""
    rows = []
    for index, (cell_id, values) in enumerate(cell_values.items()):
        for repeat, value in enumerate(values):
            ok = value is not None
            rows.append({"trial_id": f"{cell_id}-{repeat}", "cell_id": cell_id, "repeat": repeat,
                         "is_baseline": cell_id == baseline, "status": "ok" if ok else "failed", axis: index,
                         "step_p50_s": value, "step_p95_s": 2 * value if ok else None,
                         "step_mean_s": value, "items_per_s": 32 / value if ok else None, "num_cpus": index + 1.0,
                         "started_at": 1000.0 + repeat, **(extra or {}).get(cell_id, {})})
    return pd.DataFrame(rows)


def _around(center, n, spread=0.01, seed=0):
    return list(center * (1 + spread * np.random.default_rng(seed).standard_normal(n)))


EMPTY = pd.DataFrame()


# --------------------------------------------------------------------------- verdicts


def test_verdicts_faster_slower_same_and_failed():
    summary = _summary({"c0": _around(0.010, 16), "c1": _around(0.020, 8, seed=1),
                        "c2": _around(0.007, 8, seed=2), "c3": _around(0.010, 8, seed=3), "c4": [None, None]})
    a = analyze(summary, EMPTY)
    v = a.verdicts.set_index("cell_id")
    assert a.baseline_id == "c0" and list(a.verdicts["cell_id"])[0] == "c0"
    assert v.loc["c0", "verdict"] == "baseline"
    assert v.loc["c1", "verdict"] == "slower" and v.loc["c1", "p50_ratio"] == pytest.approx(2.0, rel=0.02)
    assert v.loc["c2", "verdict"] == "faster" and v.loc["c2", "p50_delta"] == 1.0
    assert v.loc["c1", "p50_delta"] == -1.0     # Cliff's delta > 0: the cell tends to be faster, for any metric
    assert v.loc["c2", "throughput_delta"] == 1.0 and v.loc["c1", "throughput_delta"] == -1.0
    assert v.loc["c3", "verdict"] == "no detectable change"
    assert v.loc["c4", "verdict"] == "failed" and list(a.verdicts["cell_id"])[-1] == "c4"
    # Holm across the family: the adjusted p is never below the raw one
    assert (v["p50_p_adj"].dropna() >= v["p50_p"].dropna()).all()
    # rows after the baseline: fastest first
    assert list(a.verdicts["cell_id"][1:4]) == ["c2", "c3", "c1"]


def test_verdict_uses_the_chosen_metric():
    # p95 differs (x 1.5), p50 does not
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.010, 10, seed=1)})
    summary.loc[summary["cell_id"] == "c1", "step_p95_s"] *= 1.5
    assert analyze(summary, EMPTY).verdicts.set_index("cell_id").loc["c1", "verdict"] == "no detectable change"
    a95 = analyze(summary, EMPTY, AnalysisConfig(metric="p95"))
    assert a95.verdicts.set_index("cell_id").loc["c1", "verdict"] == "slower"


def test_single_repeats_are_too_few_and_say_so():
    a = analyze(_summary({"c0": [0.01], "c1": [0.02]}), EMPTY)
    assert a.verdicts.set_index("cell_id").loc["c1", "verdict"] == stats.TOO_FEW
    assert any("one repeat per cell" in n for n in a.notes)
    assert a.noise_floor is None


def test_holm_family_too_large_for_the_repeats_is_too_few():
    # 3 vs 6 repeats: the smallest p is 2/84 = 0.024 < 0.05, but x 3 comparisons it cannot pass
    values = {"c0": _around(0.01, 6), "c1": _around(0.02, 3, seed=1), "c2": _around(0.02, 3, seed=2),
              "c3": _around(0.02, 3, seed=3)}
    a = analyze(_summary(values), EMPTY)
    assert set(a.verdicts["verdict"][1:]) == {stats.TOO_FEW}
    assert any("Holm" in n for n in a.notes)
    # the same data, one comparison: now detectable
    two = analyze(_summary({"c0": values["c0"], "c1": values["c1"]}), EMPTY)
    assert two.verdicts.set_index("cell_id").loc["c1", "verdict"] == "slower"


def test_noise_floor_splits_the_baseline_in_run_order():
    # The machine drifts: the first five baseline runs are fast, the last five slow.
    # Interleaved halves of the run order each get both; halves by repeat index would not.
    values = [0.010 if r % 2 == 0 else 0.020 for r in range(10)]
    summary = _summary({"c0": [v * (1 + 0.001 * r) for r, v in enumerate(values)], "c1": _around(0.01, 5)})
    position = [r // 2 if r % 2 == 0 else 5 + r // 2 for r in range(10)]   # even repeats ran first
    summary.loc[summary["cell_id"] == "c0", "started_at"] = [1000.0 + p for p in position]
    floor = analyze(summary, EMPTY).noise_floor
    assert (floor.n_a, floor.n_b) == (5, 5)
    assert floor.verdict == "no detectable change"
    by_repeat = analyze(summary.assign(started_at=None), EMPTY).noise_floor   # no start times
    assert by_repeat.verdict == "slower"


def test_baseline_from_the_config_overrides_the_plan():
    summary = _summary({"c0": _around(0.01, 6), "c1": _around(0.02, 6, seed=1)})
    a = analyze(summary, EMPTY, AnalysisConfig(baseline="num_workers=1"))   # short key
    assert a.baseline_id == "c1"
    assert a.verdicts.set_index("cell_id").loc["c0", "verdict"] == "faster"
    assert analyze(summary, EMPTY, AnalysisConfig(baseline="data.num_workers=1")).baseline_id == "c1"
    missing = analyze(summary, EMPTY, AnalysisConfig(baseline="data.num_workers=7"))
    assert missing.baseline_id is None and "matches no cell" in missing.notes[0]


def test_unmarked_run_uses_the_first_cell_and_says_so():
    summary = _summary({"c0": [0.01], "c1": [0.02]}).assign(is_baseline=False)
    a = analyze(summary, EMPTY)
    assert a.baseline_id == "c0" and "first cell" in a.notes[0]


def test_records_older_than_repeats_get_cell_ids():
    frame = pd.DataFrame([{"trial_id": "abc", "status": "ok"}, {"trial_id": "def-1", "status": "ok"}])
    out = normalise(frame)
    assert list(out["cell_id"]) == ["abc", "def"] and list(out["repeat"]) == [0, 0]
    assert not out["is_baseline"].any()


def test_throughput_is_the_default_metric_and_larger_is_faster():
    # c1 moves 1.5x the items per second of the baseline, c2 two thirds of it
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.010 / 1.5, 6, seed=1),
                        "c2": _around(0.015, 6, seed=2)})
    a = analyze(summary, EMPTY)
    v = a.verdicts.set_index("cell_id")
    assert a.metric == "throughput"
    assert v.loc["c1", "throughput_ratio"] == pytest.approx(1.5, rel=0.03)     # cell / baseline items/s
    assert v.loc["c1", "throughput_ratio_low"] < 1.5 < v.loc["c1", "throughput_ratio_high"]
    assert v.loc["c1", "verdict"] == "faster" and v.loc["c1", "throughput_delta"] == 1.0
    assert v.loc["c2", "verdict"] == "slower" and v.loc["c2", "throughput_delta"] == -1.0
    assert list(a.verdicts["cell_id"]) == ["c0", "c1", "c2"]                   # baseline, then best first
    # the ratio is the cell's figure over the baseline's: the same numbers the views print
    figure = a.cells.set_index("cell_id")["items_per_s"]
    assert v.loc["c1", "throughput_ratio"] == pytest.approx(figure["c1"] / figure["c0"])
    rec = a.recommendation
    assert rec.cell_id == "c1" and rec.objective == "throughput" and rec.gain == pytest.approx(0.5, rel=0.05)
    assert rec.gain_low <= rec.gain <= rec.gain_high


def test_significant_but_smaller_than_min_effect_reads_within():
    # 3% more throughput, tight noise: significant after Holm, but under the 5% minimum
    summary = _summary({"c0": _around(0.0100, 10, spread=0.002), "c1": _around(0.0100 / 1.03, 8, 0.002, seed=1),
                        "c2": _around(0.0100 / 1.20, 8, 0.002, seed=2)})
    a = analyze(summary, EMPTY)
    v = a.verdicts.set_index("cell_id")
    assert v.loc["c1", "throughput_p_adj"] < 0.05
    assert v.loc["c1", "verdict"] == "within 5%" and v.loc["c2", "verdict"] == "faster"
    assert analyze(summary, EMPTY, AnalysisConfig(min_effect=0.02)).verdicts \
        .set_index("cell_id").loc["c1", "verdict"] == "faster"
    assert analyze(summary, EMPTY, AnalysisConfig(min_effect=0.1)).verdicts \
        .set_index("cell_id").loc["c1", "verdict"] == "within 10%"
    # a change that small is never recommended over the baseline
    only_small = _summary({"c0": _around(0.0100, 10, spread=0.002), "c1": _around(0.0100 / 1.03, 8, 0.002, seed=1)})
    assert recommend.recommend(analyze(only_small, EMPTY)).is_baseline


def test_a_loader_whose_p50_and_throughput_disagree_is_judged_on_throughput(tmp_path):
    # "burst" has batches waiting most steps (p50 2 ms, 5x shorter than the baseline's) but
    # stalls 60 ms one step in five: fewer samples per second. "more" is steadily 25% faster.
    run = tmp_path / "loader" / "r1"
    loader_run(run)
    data, a = analyze_run(run, AnalysisConfig())
    v = a.verdicts.set_index("cell_id")
    assert v.loc["burst", "verdict"] == "slower" and v.loc["burst", "throughput_ratio"] < 0.8
    assert v.loc["burst", "p50_verdict"] == "faster" and v.loc["burst", "p50_ratio"] < 0.25   # what p50 would claim
    assert v.loc["more", "verdict"] == "faster"
    assert a.recommendation.cell_id == "more" and a.recommendation.gain == pytest.approx(0.25, abs=0.02)
    assert a.workload.items_label == "samples" and a.workload.memory == "host_mem_gb"
    line = next(x for x in recommend.format_recommendation(a.recommendation) if x.startswith("recommended"))
    assert "samples/s" in line and "judged on throughput" in line
    # analysis.metric=p50 still works, and judges the other way
    _, p50 = analyze_run(run, AnalysisConfig(metric="p50"))
    assert p50.metric == "p50" and p50.recommendation.cell_id == "burst"
    assert p50.verdicts.set_index("cell_id").loc["burst", "verdict"] == "faster"
    assert list(p50.verdicts["cell_id"]) == ["base", "burst", "more"]        # best first by p50


def test_headline_figures_and_memory_come_from_the_workload_spec(tmp_path):
    run = tmp_path / "run"
    records = write_run(run, [("a", {"data.x": 1}, steady(0.01)), ("b", {"data.x": 2}, steady(0.02))], repeats=3,
                        spec={**LOADER_SPEC, "items_label": "tokens", "memory": "gpu_mem_gb",
                              "headline": [["time_to_first_batch_s", "first batch ms", 1e3, 1]]})
    data, a = analyze_run(run, AnalysisConfig(), records=records)
    assert a.workload.items_label == "tokens" and a.workload.memory == "gpu_mem_gb"
    assert a.workload.headline == (("time_to_first_batch_s", "first batch ms", 1e3, 1),)
    firsts = [r["figures"]["time_to_first_batch_s"] for r in records if r["cell_id"] == "b"]
    assert a.cells.set_index("cell_id").loc["b", "time_to_first_batch_s"] == pytest.approx(np.median(firsts))
    # a headline figure no trial recorded is no column
    run2 = tmp_path / "run2"
    unrecorded = {**LOADER_SPEC, "headline": [["mfu", "MFU %", 100.0, 1], *LOADER_SPEC["headline"]]}
    write_run(run2, [("a", {"data.x": 1}, steady(0.01)), ("b", {"data.x": 2}, steady(0.02))], repeats=2,
              spec=unrecorded)
    _, a2 = analyze_run(run2, AnalysisConfig(), n_resamples=10)
    assert [h[0] for h in a2.workload.headline] == ["time_to_first_batch_s"] and "mfu" not in a2.cells
    # records older than specs: items, the first-batch time when recorded, memory from what the cells hold
    old = load_run(DATA / "dataloader-r5")
    view = analyze(old.summary, old.steps, records=old.records, n_resamples=100).workload
    assert (view.items_label, view.memory) == ("items", "host_mem_gb")
    assert [h[0] for h in view.headline] == ["time_to_first_batch_s"]


# --------------------------------------------------------------------------- cell statistics


def _steps(trial_ids, n=40, seed=0):
    rng = np.random.default_rng(seed)
    frames = [pd.DataFrame({"trial_id": t, "step": range(n + 2), "warmup": [True, True] + [False] * n,
                            "items": 32, "step_s": np.r_[[1.0, 1.0], 0.01 * np.exp(rng.normal(0, 0.1, n))],
                            "phase_data_wait_s": 0.005}) for t in trial_ids]
    return pd.concat(frames, ignore_index=True)


def test_intervals_drawn_from_one_repeats_steps_say_so_even_when_the_cell_ran_two():
    summary = _summary({"c0": [0.01, 0.01]})
    steps = _steps(summary["trial_id"])
    steps.loc[(steps["trial_id"] == "c0-1") & ~steps["warmup"], "step_s"] = np.nan     # no step of it measured
    c0 = cell_table(summary, steps, n_resamples=200).set_index("cell_id").loc["c0"]
    assert c0["ci_over"] == "steps" and c0["p50_low"] < c0["p50_high"]


def test_cell_table_from_steps_leaves_out_warmup():
    summary = _summary({"c0": [0.01, 0.01, 0.01], "c1": [0.01]})
    steps = _steps(summary["trial_id"])
    table = cell_table(summary, steps, n_resamples=200).set_index("cell_id")
    c0, c1 = table.loc["c0"], table.loc["c1"]
    assert c0["steps"] == 120 and c1["steps"] == 40                        # warm-up (1 s steps) left out
    assert c0["ci_over"] == "repeats" and c1["ci_over"] == "steps"
    for name in ("p50", "p95", "mean", "std", "cv", "items_per_s"):
        assert c0[f"{name}_low"] <= c0[name] <= c0[f"{name}_high"], name
    measured = steps[(~steps["warmup"]) & steps["trial_id"].str.startswith("c0")]
    per_repeat = measured.groupby("trial_id")["step_s"]
    # figures judged: the median over repeats of each repeat's figure
    assert c0["p50"] == pytest.approx(np.median(per_repeat.median()))
    assert c0["items_per_s"] == pytest.approx(np.median(32 * per_repeat.size() / per_repeat.sum()))
    # the spread: over the pooled steps
    assert c0["cv"] == pytest.approx(measured["step_s"].std(ddof=1) / measured["step_s"].mean())
    assert c0["mean"] == pytest.approx(measured["step_s"].mean())
    assert c0["num_cpus"] == 1.0 and c1["num_cpus"] == 2.0


def test_items_per_s_counts_each_steps_cycle_where_the_probe_recorded_one():
    summary = _summary({"c0": [0.01, 0.01, 0.01], "c1": [0.01]})
    steps = _steps(summary["trial_id"])
    steps["cycle_s"] = steps["step_s"] + 0.002            # 2 ms between steps
    steps.loc[steps["trial_id"] == "c0-1", "cycle_s"] = np.nan    # an older trial: its steps' own time
    table = cell_table(summary, steps, n_resamples=200).set_index("cell_id")
    measured = steps[~steps["warmup"]]
    rate = {t: 32 * len(g) / g["cycle_s"].fillna(g["step_s"]).sum() for t, g in measured.groupby("trial_id")}
    assert table.loc["c0", "items_per_s"] == pytest.approx(np.median([rate["c0-0"], rate["c0-1"], rate["c0-2"]]))
    assert table.loc["c0", "items_per_s_low"] <= table.loc["c0", "items_per_s"] <= table.loc["c0", "items_per_s_high"]
    assert table.loc["c1", "items_per_s"] == pytest.approx(rate["c1-0"])          # one repeat: over its steps
    assert table.loc["c1", "items_per_s_high"] < 32 * 40 / measured.loc[measured["trial_id"] == "c1-0", "step_s"].sum()
    repeats = repeat_table(summary, steps).set_index("trial_id")
    assert repeats.loc["c0-0", "items_per_s"] == pytest.approx(rate["c0-0"])


def test_repeat_table_prefers_steps_over_the_summary():
    summary = _summary({"c0": [0.5, 0.5]})
    table = repeat_table(summary, _steps(["c0-0"]))
    assert table.loc[0, "p50"] == pytest.approx(0.01, rel=0.1)             # from its steps
    assert table.loc[1, "p50"] == 0.5                                      # no steps: from the summary


def test_trial_memory_sources():
    steps = pd.DataFrame({"mem_main_pss_mb": [100.0, np.nan, 300.0], "mem_workers_pss_mb": [50.0, np.nan, np.nan],
                          "gpu_mem_peak_reserved_mb": [1000.0, 2000.0, np.nan]})
    got = trial_memory(pd.Series({}, dtype=object), steps)
    assert got == {"gpu_mem_gb": 2.0, "host_mem_gb": 0.3}                  # max of the per-step sums
    maxima = pd.Series({"mem_main_pss_mb_max": 100.0, "mem_workers_pss_mb_max": 60.0})
    assert trial_memory(maxima, None)["host_mem_gb"] == pytest.approx(0.16)
    assert trial_memory(pd.Series({"peak_gpu_mem_gb": 7.5}), None)["gpu_mem_gb"] == 7.5
    assert all(math.isnan(v) for v in trial_memory(pd.Series({}, dtype=object), None).values())


# --------------------------------------------------------------------------- recommendation


def test_recommends_the_largest_significant_gain():
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.008, 6, seed=1), "c2": _around(0.005, 6, seed=2)})
    rec = recommend.recommend(analyze(summary, EMPTY))
    assert rec.cell_id == "c2" and rec.verdict == "faster" and not rec.is_baseline
    assert rec.gain == pytest.approx(1.0, rel=0.05)                          # 2x faster: +100%
    assert rec.gain_low <= rec.gain <= rec.gain_high
    text = "\n".join(recommend.format_recommendation(rec))
    assert "recommended: num_workers=2" in text and "faster than the baseline" in text


def test_constraints_exclude_and_unrecorded_ones_are_ignored():
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.008, 6, seed=1), "c2": _around(0.005, 6, seed=2)})
    cfg = AnalysisConfig(constraints=ConstraintsConfig(max_cpus=2, max_gpu_mem_gb=10))
    rec = recommend.recommend(analyze(summary, EMPTY, cfg), cfg)
    assert rec.cell_id == "c1"                                               # c2 asks for 3 CPUs
    assert rec.applied == ["max_cpus=2 CPUs"] and rec.excluded == ["num_workers=2"]
    assert "no gpu_mem_gb" in rec.ignored[0] and "ignored" in rec.ignored[0]


def test_memory_constraint_uses_recorded_peaks():
    extra = {"c0": {"peak_gpu_mem_gb": 4.0}, "c1": {"peak_gpu_mem_gb": 30.0}, "c2": {"peak_gpu_mem_gb": 8.0}}
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.005, 6, seed=1), "c2": _around(0.008, 6, seed=2)},
                       extra=extra)
    cfg = AnalysisConfig(constraints=ConstraintsConfig(max_gpu_mem_gb=16))
    rec = recommend.recommend(analyze(summary, EMPTY, cfg), cfg)
    assert rec.cell_id == "c2" and rec.applied == ["max_gpu_mem_gb=16 GB"] and not rec.ignored


def test_nothing_detectably_faster_keeps_the_baseline():
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.0099, 6, seed=1)})
    rec = recommend.recommend(analyze(summary, EMPTY))
    assert rec.is_baseline and rec.cell_id == "c0"
    lines = recommend.format_recommendation(rec)
    assert any("keep the baseline" in line for line in lines)
    assert any(line.startswith("best point estimate: num_workers=1") for line in lines)


@pytest.mark.parametrize("objective", ["throughput", "fastest", "cost"])
def test_a_baseline_without_a_successful_repeat_gets_no_recommendation(objective):
    """Every gain is relative to the baseline: with all its repeats failed, nothing is recommended
    and the one line says why (it read "seed=4: - faster than the baseline (128 vs - items/s)")."""
    summary = _summary({"c0": [None, None, None], "c1": _around(0.010, 3, seed=1), "c2": _around(0.008, 3, seed=2)})
    cfg = AnalysisConfig(objective=objective)
    a = analyze(summary, EMPTY, cfg)
    assert a.recommendation.cell_id is None and a.recommendation.baseline_failed
    assert recommend.recommendation_lines(a) == [
        "no recommendation: the baseline num_workers=0 has no successful repeat, so no cell can be compared with it; "
        "see why its trials failed (their trial.json), then run the sweep again"]
    # and the notes blame the baseline, not the repeat count ("too few repeats ...; raise repeats")
    assert a.notes[0].startswith("the baseline num_workers=0 has no successful repeat")
    assert not any(note.startswith("too few repeats") for note in a.notes)
    # the verdicts, which the note and the recommendation read, say the same of every cell and metric
    judged = a.verdicts[a.verdicts["cell_id"] != "c0"]
    assert (judged[["throughput_verdict", "p50_verdict", "p95_verdict"]] == "no baseline result").all().all()


def test_per_item_objective_when_batch_size_is_swept():
    # same step time, twice the items per step: the step-time verdict sees no change,
    # the recommendation ranks by time per item
    summary = _summary({"c0": _around(0.010, 10), "c1": _around(0.010, 6, seed=1)}, axis="data.batch_size")
    summary.loc[summary["cell_id"] == "c1", "items_per_s"] *= 2
    a = analyze(summary, EMPTY, AnalysisConfig(metric="p50"))
    summary_mean = a.repeats.assign(mean=summary["step_mean_s"].to_numpy())
    rec = recommend.recommend(dataclasses.replace(a, repeats=summary_mean))
    assert rec.objective == recommend.PER_ITEM and rec.cell_id == "c1"
    assert rec.gain == pytest.approx(1.0, rel=0.05)
    assert rec.baseline_value / rec.value == pytest.approx(1 + rec.gain, rel=1e-9)   # the figures shown agree


def test_per_item_objective_of_a_repeats_auto_run_is_decided_by_its_looks():
    # two repeats against the baseline's four: a rank test could only say "too few repeats"
    from sweeper.schema import SequentialConfig

    summary = _summary({"c0": _around(0.010, 4), "c1": _around(0.010, 2, seed=1)}, axis="data.batch_size")
    summary.loc[summary["cell_id"] == "c1", "items_per_s"] *= 2
    a = analyze(summary, EMPTY, AnalysisConfig(metric="p50"), sequential=SequentialConfig())
    rec = recommend.recommend(dataclasses.replace(a, repeats=a.repeats.assign(mean=summary["step_mean_s"].to_numpy())))
    assert rec.objective == recommend.PER_ITEM and rec.cell_id == "c1" and rec.verdict == stats.FASTER
    assert rec.gain == pytest.approx(1.0, rel=0.05) and rec.gain_low < rec.gain < rec.gain_high


# --------------------------------------------------------------------------- real result folders


def test_results_load_real_run():
    summary, steps = load(DATA / "sleepy-a")
    assert len(summary) == 15 and summary["status"].eq("ok").all()
    assert {"cell_id", "repeat", "is_baseline", "data.batch_size", "step_p50_s"} <= set(summary.columns)
    assert set(steps["trial_id"]) == set(summary["trial_id"])
    assert steps.groupby("trial_id").size().eq(23).all()                   # 3 warm-up + 20 measured
    assert summary.groupby("cell_id").size().sort_values().tolist() == [5, 10]   # baseline twice as often


def test_analysis_of_a_real_dataloader_run():
    data = load_run(DATA / "dataloader-r5")
    a = analyze(data.summary, data.steps)
    v = a.verdicts.set_index("cell")
    assert v.loc["num_workers=0 pin_memory=False", "verdict"] == "baseline"
    assert v.loc["num_workers=0 pin_memory=False", "repeats"] == 10
    # one worker process on 2 cores is slower than loading in the main process
    assert v.loc["num_workers=1 pin_memory=False", "verdict"] == "slower"
    # pin_memory has no effect without CUDA: no verdict may claim one
    assert v.loc["num_workers=0 pin_memory=True", "verdict"] == "no detectable change"
    assert a.noise_floor.verdict == "no detectable change"
    assert (a.cells["host_mem_gb"] > 0.05).all()                            # the probe's PSS readings
    # per-repeat p50 from the steps equals the trial's own summary figure
    merged = a.repeats.merge(data.summary[["trial_id", "step_p50_s"]], on="trial_id")
    assert np.allclose(merged["p50"], merged["step_p50_s"])


# --------------------------------------------------------------------------- the config sections


@pytest.mark.parametrize("section, values, key", [
    ("analysis", {"metric": "p99"}, "analysis.metric"),
    ("analysis", {"alpha": 1.5}, "analysis.alpha"),
    ("analysis", {"min_effect": -0.1}, "analysis.min_effect"),
    ("analysis", {"baseline": "num_workers"}, "analysis.baseline"),
    ("analysis", {"heatmap": ["data.num_workers"]}, "analysis.heatmap"),
    ("analysis", {"constraints": {"max_cpus": 0}}, "analysis.constraints.max_cpus"),
    ("analysis", {"constraints": {"max_gpu_memory": 8}}, "analysis.constraints.max_gpu_memory"),
    ("wandb", {"mode": "cloud"}, "wandb.mode"),
    ("wandb", {"api_key": "x"}, "wandb.api_key"),
    ("report", {"html": True}, "report.html"),
])
def test_root_sections_are_checked_with_their_dotted_key(section, values, key):
    from sweeper.errors import ConfigError
    from sweeper.schema import root_config_from_dict

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        root_config_from_dict({section: values})


def test_root_sections_defaults_and_values():
    from sweeper.schema import root_config_from_dict

    root = root_config_from_dict({"analysis": {"baseline": "data.num_workers=0", "metric": "p95",
                                               "constraints": {"max_host_mem_gb": 8}},
                                  "wandb": {"mode": "online"}})
    assert root.analysis.metric == "p95" and root.analysis.constraints.max_host_mem_gb == 8
    assert root.wandb.mode == "online" and root.wandb.enabled and root.report.enabled
    default = root_config_from_dict({})
    assert (default.analysis.alpha, default.analysis.min_effect, default.wandb.mode) == (0.05, 0.05, "offline")


def test_load_rebuilds_a_summary_older_than_the_trial_folders(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "sleepy-a", run)
    full, _ = load(run)
    full.head(3).to_parquet(run / "summary.parquet", index=False)   # as if stopped between rewrites
    summary, _ = load(run)
    assert len(summary) == len(full) == 15
    assert sorted(summary["trial_id"]) == sorted(full["trial_id"])


def test_an_aborted_step_counts_neither_in_the_record_nor_in_the_analysis():
    """One rule (measure/rules.py): the probe's summary (the record) and the analysis' repeat
    figures leave out the warm-up step and the aborted one (it raised; 3 s of host time)."""
    from sweeper.probe import Probe

    rows = [{"step": 0, "warmup": True, "step_s": 0.5, "items": 32},
            {"step": 1, "warmup": False, "step_s": 0.010, "items": 32},
            {"step": 2, "warmup": False, "aborted": True, "step_s": 3.0, "items": 32},
            {"step": 3, "warmup": False, "step_s": 0.020, "items": 32}]
    record = Probe().summary(rows)
    assert record["steps"] == 2 and record["items_per_s"] == pytest.approx(64 / 0.030)
    summary = pd.DataFrame([{"trial_id": "t-0", "cell_id": "t", "repeat": 0, "status": "ok"}])
    repeat = repeat_table(summary, pd.DataFrame(rows).assign(trial_id="t-0")).iloc[0]
    assert repeat["steps"] == 2 and repeat["items_per_s"] == pytest.approx(64 / 0.030)
    assert repeat["p50"] == pytest.approx(0.015) and record["step_p50_s"] == pytest.approx(0.015)
