"""repeats=auto's statistics (sweeper/analysis/{boundaries,sequential}.py): boundaries against
published values and a Monte Carlo, the first round, the looks, the race. Seeded, in-process."""
import math

import numpy as np
import pytest

from sweeper.analysis import boundaries, contrasts, sequential as seq, slow
from sweeper.analysis.run import analyze_run
from sweeper.analysis.stats import FASTER, NO_CHANGE, SLOWER, within
from sweeper.schema import AnalysisConfig
from tests.synthetic_runs import steady, write_run


# -- boundaries ---------------------------------------------------------------------------
def test_pocock_type_spending_gives_the_published_boundaries():
    # Lan-DeMets Pocock-type spending, 5 equally spaced looks, two-sided alpha 0.05
    # (Jennison and Turnbull, table 7.6): 2.438, 2.427, 2.410, 2.397, 2.389
    z = boundaries.boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.05, "pocock")
    assert z == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.389], abs=0.004)


@pytest.mark.parametrize("kind", boundaries.SPENDING)
def test_one_look_is_the_fixed_test(kind):
    assert boundaries.nominal_levels(5, 5, 0.05, kind) == pytest.approx((0.05,), abs=1e-4)


@pytest.mark.parametrize("kind", boundaries.SPENDING)
def test_brownian_paths_cross_the_boundaries_with_probability_alpha(kind):
    fractions = np.array([2, 3, 4, 5, 6]) / 6
    z = np.array(boundaries.boundaries(list(fractions), 0.05, kind))
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((40_000, fractions.size)) * np.sqrt(np.diff(np.r_[0, fractions]))
    paths = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = (np.abs(paths) >= z).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.004)


def test_obrien_fleming_keeps_its_alpha_for_the_last_look_and_pocock_spends_early():
    obf, pocock = boundaries.nominal_levels(2, 6, 0.05, "obrien_fleming"), boundaries.nominal_levels(2, 6, 0.05)
    assert obf[0] < pocock[0] / 10 and obf[-1] > pocock[-1]


# -- the first round ------------------------------------------------------------------------
def test_the_rank_tests_first_round_grows_with_the_comparisons_and_three_against_six_cannot_pass_four():
    assert boundaries.rank_min_p(3, 6) * 4 > 0.05          # the case: no verdict possible
    rounds = [boundaries.first_round(m, 0.05, 10, min_p=boundaries.rank_min_p) for m in (1, 4, 8)]
    assert rounds == [4, 4, 5]
    n = rounds[1]
    assert boundaries.rank_min_p(n, 2 * n) < boundaries.level(n, n, 10, 0.05 / 4)


def test_the_t_tests_first_round_is_two_repeats_whatever_the_comparisons():
    assert [boundaries.first_round(m, 0.05, 6) for m in (1, 4, 20)] == [2, 2, 2]


# -- one look and the replay ------------------------------------------------------------------
def _values(rng, effect: float, cv: float, n: int):
    return dict(enumerate(np.exp(rng.normal(-math.log1p(effect), cv, n))))


def _stratum(effects, cv, design, seed=0):
    rng = np.random.default_rng(seed)
    values = {"base": _values(rng, 0.0, cv, 4 * design.max_repeats)}
    values.update({f"c{i}": _values(rng, e, cv, design.max_repeats) for i, e in enumerate(effects)})
    return values, {c: design.max_repeats for c in values if c != "base"}


def test_a_clear_slowdown_is_decided_in_the_first_looks_and_an_identical_cell_within_the_minimum_effect():
    design = seq.Design(max_repeats=6, first=2)
    values, rounds = _stratum([0.30, 0.0], 0.005, design)
    found = seq.replay(values, rounds, "base", design).decisions
    assert (found["c0"].verdict, found["c0"].reason) == (SLOWER, seq.DECIDED) and found["c0"].n <= 3
    assert found["c1"].verdict == within(0.05) and found["c1"].reason == seq.DECIDED
    assert found["c0"].low < found["c0"].ratio < found["c0"].high < 1


def test_faster_is_the_other_direction_and_lower_is_better_flips_it():
    design = seq.Design(max_repeats=6, first=2)
    values, rounds = _stratum([-0.2], 0.01, design)
    assert seq.replay(values, rounds, "base", design).decisions["c0"].verdict == FASTER
    latency = seq.Design(max_repeats=6, first=2, higher_is_better=False)
    assert seq.replay(values, rounds, "base", latency).decisions["c0"].verdict == SLOWER


def test_a_decision_is_kept_whatever_comes_later_and_only_open_cells_want_more():
    design = seq.Design(max_repeats=6, first=2)
    values, _ = _stratum([0.30, 0.04], 0.03, design, seed=3)
    early = seq.replay(values, {"c0": 2, "c1": 2}, "base", design)
    later = seq.replay(values, {"c0": 2, "c1": 6}, "base", design)
    assert early.decisions["c0"] == later.decisions["c0"]
    assert seq.wanting(early.decisions, {"c0": 2, "c1": 2}, design) == \
        [c for c, d in early.decisions.items() if d.is_open]


def test_a_baseline_whose_every_repeat_failed_closes_its_cells_instead_of_running_them_to_their_maximum():
    """Nothing can be judged against it: its cells ran every round to max_repeats before."""
    design = seq.Design(max_repeats=6, first=2)
    values, _ = _stratum([0.30, 0.0], 0.03, design, seed=3)
    failed = {**values, "base": {r: math.nan for r in values["base"]}}
    found = seq.replay(failed, {"c0": 2, "c1": 2}, "base", design).decisions
    assert {c: d.reason for c, d in found.items()} == {"c0": seq.BASELINE_FAILED, "c1": seq.BASELINE_FAILED}
    assert seq.wanting(found, {"c0": 2, "c1": 2}, design) == []
    one_left = {**failed, "base": {**failed["base"], 3: values["base"][3]}}      # one repeat of it succeeded
    assert all(d.reason != seq.BASELINE_FAILED for d in seq.replay(one_left, {"c0": 2, "c1": 2}, "base",
                                                                    design).decisions.values())


def test_noise_with_no_effect_ends_as_no_detectable_change_and_a_cell_open_at_the_end_stopped_at_the_budget():
    design = seq.Design(max_repeats=6, first=2)
    values, rounds = _stratum([0.0], 0.10, design, seed=1)
    found = seq.replay(values, rounds, "base", design).decisions["c0"]
    assert found.verdict == NO_CHANGE and found.reason in (seq.DECIDED, seq.AT_MAX)
    cut = seq.closed(seq.replay(values, {"c0": 2}, "base", seq.Design(max_repeats=6, first=2, futility=0)).decisions)
    assert cut["c0"].reason == seq.BUDGET and cut["c0"].verdict == seq.UNDECIDED


def test_holm_holds_the_smallest_p_to_alpha_over_the_comparisons():
    design = seq.Design(max_repeats=6, first=2)
    values, rounds = _stratum([0.30, 0.0, 0.0, 0.0], 0.005, design)
    first = seq.replay(values, {c: 2 for c in rounds}, "base", design).decisions
    assert first["c0"].level == pytest.approx(boundaries.level(2, 2, 6, 0.05 / 4, design.spending))


def test_the_baseline_gets_twice_a_cells_repeats_first_then_sqrt_of_the_open_cells():
    design = seq.Design(max_repeats=6, first=2)
    assert seq.baseline_target(2, 4, design, 0) == 4
    assert seq.baseline_target(3, 4, design, 4) == 6 and seq.baseline_target(3, 1, design, 4) == 4


def test_the_stratum_variance_is_pooled_and_a_cell_significantly_noisier_is_judged_with_its_own():
    quiet, noisy = np.log([1.0, 1.001, 0.999]), np.log([1.0, 1.2, 0.8])
    stratum = contrasts.pooled([quiet, quiet, noisy])
    assert contrasts.noisier(noisy, stratum) and not contrasts.noisier(quiet, stratum)
    own_se, _ = contrasts.welch(noisy, quiet)
    assert contrasts.contrast(noisy, quiet, stratum).se == pytest.approx(own_se)
    pooled_se = math.sqrt(stratum[0] * (1 / 3 + 1 / 3))
    assert contrasts.contrast(quiet + 0.01, quiet, stratum).se == pytest.approx(pooled_se)
    swapped = contrasts.contrast(quiet + 0.1, quiet, stratum), contrasts.contrast(quiet, quiet + 0.1, stratum)
    assert swapped[0].d == pytest.approx(-swapped[1].d) and swapped[0].p() == pytest.approx(swapped[1].p())


def test_a_cell_with_no_sign_of_an_effect_stops_at_the_first_look_though_more_repeats_might_show_it_within():
    design = seq.Design(first=2)
    values = {"base": dict(enumerate(np.exp([0.02, -0.02, 0.02, -0.02]))), "c0": dict(enumerate(np.exp([0.02, -0.02])))}
    found = seq.replay(values, {"c0": 2}, "base", design).decisions["c0"]
    assert found.high > 1 + design.min_effect                      # not yet within 5%
    assert (found.verdict, found.reason, found.n) == (NO_CHANGE, seq.DECIDED, 2)


def test_a_small_clear_change_stops_at_the_first_look_and_one_that_may_pass_the_minimum_effect_goes_on():
    """Going on must be able to end faster or slower: significant *and* past min_effect. A 3% change
    at 1% noise would end significant, but only as "within 5%", which a 7-repeat interval rarely
    reaches: it ran to its maximum for it when futility asked for significance alone."""
    design = seq.Design(first=2)
    values = {"base": dict(enumerate(np.exp([0.01, -0.01, 0.01, -0.01]))),
              "small": dict(enumerate(np.exp([-0.02, -0.04]))), "large": dict(enumerate(np.exp([-0.07, -0.09])))}
    found = seq.replay(values, {"small": 2, "large": 2}, "base", design).decisions
    assert found["small"].low < 1 / (1 + design.min_effect)      # not yet within 5%
    assert (found["small"].verdict, found["small"].reason, found["small"].n) == (NO_CHANGE, seq.DECIDED, 2)
    assert found["large"].is_open                                  # 8% may still end past 5%


def test_a_cell_closed_at_a_look_lends_the_later_looks_only_the_repeats_it_ran():
    design = seq.Design(first=2)
    values, _ = _stratum([0.30, 0.08], 0.02, design, seed=2)
    ran = seq.replay(values, {"c0": 2, "c1": design.max_repeats}, "base", design).decisions
    assert not ran["c0"].is_open and ran["c0"].n == 2 and ran["c1"].n > 3
    values["c0"].update({r: v * (3.0 if r % 2 else 0.3) for r, v in values["c0"].items() if r >= 2})
    replayed = seq.replay(values, {"c0": design.max_repeats, "c1": design.max_repeats}, "base", design).decisions
    assert replayed == ran                  # its wild later values, never run by the sweep, change nothing


def test_a_and_a_sweeps_seldom_call_anything_faster_or_slower():
    design = seq.Design(max_repeats=6, first=2)
    alarms = 0
    for seed in range(150):
        values, rounds = _stratum([0.0] * 4, 0.02, design, seed=seed)
        found = seq.replay(values, rounds, "base", design).decisions.values()
        alarms += any(d.verdict in (FASTER, SLOWER) for d in found)
    assert alarms / 150 <= 0.05


# -- the race -------------------------------------------------------------------------------
def test_the_race_drops_a_cell_clearly_behind_the_leader_and_names_the_fastest_with_its_ties():
    design = seq.Design(max_repeats=6, first=2, race=True, futility=0)
    values, rounds = _stratum([-0.20, -0.20, -0.048], 0.03, design, seed=2)
    found = seq.replay(values, rounds, "base", design).decisions
    assert found["c2"].reason == seq.DROPPED and found["c2"].n < 6
    best = seq.fastest(values, "base", found, design)
    assert best.cell_id in ("c0", "c1") and set(best.tied) == {"c0", "c1"} - {best.cell_id}
    assert best.low < best.ratio < best.high and best.ratio == pytest.approx(1.25, abs=0.03)


def test_without_the_race_no_cell_is_dropped():
    design = seq.Design(max_repeats=6, first=2)
    values, rounds = _stratum([-0.20, -0.03, 0.02], 0.03, design, seed=2)
    assert all(d.reason != seq.DROPPED for d in seq.replay(values, rounds, "base", design).decisions.values())


# -- the analysis of a repeats=auto run ---------------------------------------------------------
def _auto_run(tmp_path, cells, cfg=None, bounds="sequential: {max_repeats: 6}\n"):
    """(cell, step times) pairs, the first the baseline, written as a repeats=auto run of 3 repeats
    (data.num_workers = the cell's index) and analysed."""
    run = tmp_path / "run"
    records = write_run(run, [(c, {"data.num_workers": i}, steps) for i, (c, steps) in enumerate(cells)], repeats=3)
    (run / "multirun.yaml").write_text("repeats: auto\n" + bounds)
    return analyze_run(run, cfg or AnalysisConfig(), records=records, n_resamples=50)[1]


def test_the_analysis_of_a_repeats_auto_run_gives_each_cell_its_decision_and_why_it_stopped(tmp_path):
    analysis = _auto_run(tmp_path, [("base", steady(0.010, 0.002)), ("slow", steady(0.013, 0.002)),
                                    ("same", steady(0.010, 0.002))])
    table = analysis.verdicts.set_index("cell_id")
    assert table.loc["slow", "verdict"] == SLOWER and table.loc["slow", "stopped"] == seq.DECIDED
    assert table.loc["same", "verdict"] == within(0.05)
    assert table.loc["slow", "throughput_ratio"] == pytest.approx(10 / 13, abs=0.02)


def test_another_metrics_replay_takes_the_baseline_repeats_the_sweep_had_at_each_look():
    rng = np.random.default_rng(3)
    values = {"base": _values(rng, 0.0, 0.08, 16)}
    values.update({f"c{i}": _values(rng, 0.0, 0.08, 5) for i in range(3)})
    rounds, design = {c: 5 for c in values if c != "base"}, seq.Design(first=2, max_repeats=5, futility=0)
    alone = seq.replay(values, rounds, "base", design)
    assert max(alone.base_at.values()) > 4                  # on its own, Dunnett's share grows the baseline
    swept = {2: 4, 3: 4, 4: 5, 5: 5}                         # what the chosen metric's looks ran
    held = seq.replay(values, rounds, "base", design, swept)
    assert held.base_at == {r: swept[r] for r in held.base_at}
    assert all(d.n_base <= 5 for d in held.decisions.values())


def test_a_repeats_auto_run_judges_its_latency_figures_by_the_same_looks(tmp_path):
    from sweeper.analysis.stats import TOO_FEW

    analysis = _auto_run(tmp_path, [("base", steady(0.010, 0.002)), ("slow", steady(0.013, 0.002)),
                                    ("same", steady(0.010, 0.002)), ("also", steady(0.010, 0.002))])
    table = analysis.verdicts.set_index("cell_id")
    # three repeats against six, Holm over three: a rank test could not decide anything here
    assert (table.loc["slow", "p50_verdict"], table.loc["slow", "p95_verdict"]) == (SLOWER, SLOWER)
    assert table.loc["slow", "p50_ratio"] == pytest.approx(1.3, abs=0.03)             # a latency: cell / baseline
    assert TOO_FEW not in set(table[["p50_verdict", "p95_verdict"]].to_numpy().ravel())
    floor = analysis.strata[0].noise_floor              # the baseline's halves, 3 against 3, by the same test
    assert floor.verdict in (within(0.05), NO_CHANGE) and floor.ratio_low < 1 < floor.ratio_high


def test_the_noise_floor_of_a_repeats_auto_run_takes_its_own_test_only_where_there_is_something_to_test():
    import pandas as pd
    from sweeper.analysis import verdicts
    from sweeper.analysis.stats import TOO_FEW

    def floor(values):
        frame = pd.DataFrame({"cell_id": "base", "repeat": range(len(values)), "started_at": range(len(values)),
                              "items_per_s": values})
        return verdicts.noise_floor(frame, "base", AnalysisConfig(), "throughput", design=seq.Design(first=2))

    steady_floor = floor([100.0, 100.5, 99.5, 100.2])                       # 2 vs 2: a rank test could not decide
    assert steady_floor.verdict in (within(0.05), NO_CHANGE) and 0 < steady_floor.p_value < 1
    assert floor([100.0, 100.0, 100.0, 100.0]).verdict == TOO_FEW             # no spread at all: nothing to test
    assert floor([100.0, np.nan, 101.0, np.nan]).verdict == TOO_FEW           # a half of failed repeats


def test_a_repeats_auto_run_shows_the_slow_repeats_its_looks_left_out(tmp_path):
    from sweeper.analysis.model import LEFT_OUT
    from sweeper.report import tables

    baseline_repeats = iter(range(100))

    def base_steps(rng, n):                  # the baseline's second repeat ran 40% slower: a busy machine
        return steady(0.010, 0.002)(rng, n) * (1.4 if next(baseline_repeats) == 1 else 1.0)

    analysis = _auto_run(tmp_path, [("base", base_steps), ("slow", steady(0.013, 0.002)),
                                    ("same", steady(0.010, 0.002))])
    table = analysis.verdicts.set_index("cell_id")
    assert (table.loc["base", LEFT_OUT], table.loc["slow", LEFT_OUT], table.loc["same", LEFT_OUT]) == (1, 0, 0)
    assert table.loc["slow", "verdict"] == SLOWER and table.loc["same", "verdict"] == within(0.05)
    header, rows = tables.verdicts(analysis)
    stopped = {row[header.index("cell")]: row[header.index("stopped")] for row in rows}
    assert [text for text in stopped.values() if "left out" in text] == ["1 slow repeat left out"]   # the baseline's


def test_the_effect_size_of_a_repeats_auto_cell_is_over_the_repeats_its_look_judged():
    """Cliff's delta beside a look's ratio and p: its repeats, less the slow one it left out, and
    not the repeats the baseline ran for other cells after this one stopped."""
    seen = seq.Evidence.of({"base": np.log([100.5, 101.5] * 3), "c": np.log([100.0, 101.0, 60.0, 99.0])}, True)
    assert seen.left_out("c") == 1                                # 60: slow, left out of the look
    looked = seq.look(seen, "base", ["c"], seq.Design(), 4, 1, 0)["c"]
    # baseline minus cell over every pair: 100.5 beats 100 and 99, loses to 101; 101.5 beats all three
    assert looked.delta == pytest.approx((3 * 1 + 3 * 3) / 18)
    latency = seq.Evidence.of({"base": np.log([1.05] * 6), "c": np.log([1.0, 1.1, 9.0, 1.2])}, False)
    assert seq.look(latency, "base", ["c"], seq.Design(higher_is_better=False), 4, 1, 0)["c"].delta \
        == pytest.approx(-1 / 3)                                  # 9.0 left out; 1.05 beats 1.0 only
    base = {r: 1.0 + 0.001 * r for r in range(4)} | {4: 3.0, 5: 3.0}      # 4, 5: run after c's last look
    closed = seq.replay({"base": base, "c": {0: 2.0, 1: 2.01}}, {"c": 2}, "base", seq.Design()).decisions["c"]
    assert (closed.n_base, closed.delta) == (4, -1.0)


def test_the_simulation_benchmark_judges_every_rule_on_the_same_sweeps():
    from benchmarks import sequential_sim

    text = sequential_sim.main(["--sweeps", "4", "--jobs", "1"])
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| rule")]
    assert [r.split("|")[1].strip() for r in rows] == list(sequential_sim.RULES)
    assert "| repeats=5 |" in text and "35.0 [35.0, 35.0]" in text      # 5 cells x 5 + the baseline's 10


# -- the sweep's rounds, the progress bar, the views ----------------------------------------------
def _first_round(tmp_path, failed=()):
    """A first round of repeats=auto (2 repeats, the baseline 4) of a clear slowdown and a cell 6%
    slower in noisy steps, and the plan's trials for the same cells."""
    from sweeper.plan import Trial
    from sweeper.schema import RootConfig, TrialConfig

    cells = [("base", {"data.num_workers": 0}, steady(0.010, 0.002)), ("slow", {"data.num_workers": 1},
             steady(0.013, 0.002)), ("near", {"data.num_workers": 2}, steady(0.0106, 0.08))]
    records = write_run(tmp_path / "run", cells, repeats=2, failed=failed)
    trials = [Trial(i, f"{c}-0", [], swept, TrialConfig(), cell_id=c, is_baseline=c == "base", workload="dataloader")
              for i, (c, swept, _) in enumerate(cells)]
    return RootConfig(repeats="auto"), trials, records


def test_after_a_round_only_the_open_cells_get_another_repeat(tmp_path):
    from sweeper.rounds import Rounds

    root, trials, records = _first_round(tmp_path)
    rounds = Rounds(root, trials)
    assert rounds.most_after_first() == 2 * (7 - 2) + (10 - 4)    # the baseline to sqrt(2) x 7, rounded up
    more, left = rounds.next_round(records)
    decided = rounds.last["base"].decisions
    assert decided["slow"].verdict == SLOWER and not decided["slow"].is_open
    assert [t.trial_id for t in more] == ["near-2"] and decided["near"].is_open
    assert left == (7 - 3) + (7 - 4)            # near to its maximum, the baseline to sqrt(1) x 7
    assert rounds.line().startswith("repeats=auto: ") and "1 slower" in rounds.line()


def test_a_cell_whose_last_repeat_failed_gets_no_more_and_says_why(tmp_path):
    from sweeper.rounds import Rounds

    root, trials, records = _first_round(tmp_path, failed=("near-1",))
    more, _ = Rounds(root, trials).next_round(records)
    assert more == []
    values = {"base": {r: 1.0 for r in range(4)}, "near": {0: 1.05}}
    assert seq.last_failed(values["near"], [0, 1]) and not seq.last_failed(values["base"], [0, 1, 2, 3])
    assert seq.closed({"near": seq.Decision("near")}, ["near"])["near"].reason == seq.FAILED_REPEAT


def test_the_progress_bars_total_follows_the_trials_still_possible():
    import io

    from sweeper.progress import Progress

    progress = Progress(8, stream=io.StringIO())
    for _ in range(8):
        progress.trial_done(lambda done, total, wall: f"[{done}/{total}]")
    progress.expect(8 + 1 + 5)                  # a round of one trial, five more possible after it
    assert progress.total == 14
    progress.expect(3)                          # never below what ran
    assert progress.total == 8


def test_the_race_recommends_the_fastest_and_names_the_settings_tied_with_it(tmp_path):
    from sweeper.analysis.recommend import format_recommendation
    from sweeper.report import tables

    analysis = _auto_run(tmp_path, [("base", steady(0.010, 0.002)), ("fast", steady(0.008, 0.002)),
                                    ("twin", steady(0.008, 0.002)), ("slow", steady(0.013, 0.002))],
                         AnalysisConfig(objective="fastest"), bounds="")
    rec = analysis.recommendation
    assert {rec.cell, *rec.tied} == {"num_workers=1", "num_workers=2"}
    assert rec.gain == pytest.approx(0.25, abs=0.03) and rec.gain_low < rec.gain < rec.gain_high
    lines = format_recommendation(rec)
    assert any(line.startswith("recommended (analysis.objective=fastest)") for line in lines)
    header, rows = tables.verdicts(analysis)
    assert "stopped" in header and {r[header.index("stopped")] for r in rows} >= {seq.DECIDED}
    assert "repeats=auto" in tables.judged(analysis)


def test_the_stopping_rule_reads_each_repeats_value_as_the_analysis_computes_it_from_its_steps(tmp_path):
    import io

    import pandas as pd

    from sweeper.analysis.repeats import repeat_table
    from sweeper.results import summary_frame
    from sweeper.rounds import Rounds

    root, trials, records = _first_round(tmp_path)
    rounds = Rounds(root, trials)
    record = records[0]
    steps = pd.DataFrame({"step": range(6), "warmup": [True, False, False, False, False, False],
                          "aborted": [False, False, False, False, True, False], "items": 32,
                          "step_s": [9.0, 0.01, 0.01, 0.02, 5.0, 0.01]})
    buffer = io.BytesIO()
    steps.to_parquet(buffer)
    rounds.keep_steps(record["trial_id"], {"steps.parquet": buffer.getvalue()})
    value = rounds.values(records)[record["cell_id"]][record["repeat"]]
    expected = repeat_table(summary_frame([record]), steps.assign(trial_id=record["trial_id"]))["items_per_s"].iloc[0]
    assert value == pytest.approx(expected) == pytest.approx(4 * 32 / 0.05)    # neither warm-up nor aborted counts
    assert value != pytest.approx(record["summary"]["items_per_s"])


def _noisy_cell_alarms(sweeps: int, base_cv: float = 0.02, cvs=(0.02, 0.02, 0.02, 0.02, 0.10)) -> float:
    """A/A sweeps where one cell (by default) is five times noisier than the baseline and the others."""
    design = seq.Design(first=2)
    rng, alarms = np.random.default_rng(11), 0
    for _ in range(sweeps):
        values = {"base": _values(rng, 0.0, base_cv, 24)}
        values.update({f"c{i}": _values(rng, 0.0, cv, 7) for i, cv in enumerate(cvs)})
        found = seq.replay(values, {c: 7 for c in values if c != "base"}, "base", design).decisions.values()
        alarms += any(d.verdict in (FASTER, SLOWER) for d in found)
    return alarms / sweeps


def test_a_cell_noisier_than_its_neighbours_is_judged_with_its_own_noise():
    assert _noisy_cell_alarms(400) <= 0.05


def test_a_baseline_noisier_than_its_cells_is_not_trimmed_for_its_own_noise():
    """Its low values are no busy machine's: leaving them out would lift its mean and call every
    cell slower (6.5% of these sweeps when the rule took the stratum's spread alone)."""
    assert _noisy_cell_alarms(400, base_cv=0.10, cvs=(0.02,) * 5) <= 0.04


# -- slow repeats: a busy machine's one slow value ----------------------------------------------
def _shifted_cells(slowed: tuple):
    """The +0, +3, +10 and +30%-slower cells at 1.5% noise, with repeat `slowed` = (cell, repeat) 30% slow."""
    rng = np.random.default_rng(1)
    values = {"base": _values(rng, 0.0, 0.015, 28)}
    values.update({f"c{i}": _values(rng, e, 0.015, 7) for i, e in enumerate([0.0, 0.03, 0.10, 0.30])})
    cell, repeat = slowed
    values[cell][repeat] *= 0.7
    return values


def test_a_slow_baseline_repeat_is_left_out_and_the_real_slowdowns_are_still_found():
    values = _shifted_cells(("base", 1))
    found = seq.closed(seq.replay(values, {c: 7 for c in values if c != "base"}, "base", seq.Design(first=2)).decisions)
    assert (found["c2"].verdict, found["c3"].verdict) == (SLOWER, SLOWER)
    assert found["c0"].verdict not in (FASTER, SLOWER) and found["c1"].verdict not in (FASTER, SLOWER)
    assert found["c3"].n_base == 4 and found["c3"].n == 2      # decided at the first look, the slow repeat counted as run
    assert (found["c3"].base_left_out, found["c3"].left_out) == (1, 0)      # and said to be left out of it


def test_a_cell_too_small_to_tell_its_slow_repeat_apart_gets_no_futility_stop_until_it_can():
    values = _shifted_cells(("c0", 1))
    design = seq.Design(first=2)
    for upto in (2, 3):                     # its slow repeat cannot be left out yet: the cell goes on
        early = seq.replay(values, {c: upto for c in values if c != "base"}, "base", design).decisions
        assert early["c0"].is_open and early["c0"].verdict == seq.UNDECIDED
    assert (early["c2"].verdict, early["c3"].verdict) == (SLOWER, SLOWER)     # its neighbours are judged meanwhile
    later = seq.replay(values, {c: 4 for c in values if c != "base"}, "base", design).decisions
    assert not later["c0"].is_open and later["c0"].verdict not in (FASTER, SLOWER)


def test_the_slow_rule_names_only_values_far_below_their_cells_median_in_the_metrics_direction():
    logs = {"base": np.log([100.0, 101.0, 99.0, 70.0]), "a": np.log([100.0, 99.5]), "b": np.log([98.0]),
            "c": np.log([95.0, 96.0]), "d": np.log([90.0, 89.0])}
    masks = slow.slow_masks(logs)
    assert masks["base"].tolist() == [False, False, False, True] and not masks["a"].any() and not masks["b"].any()
    assert not slow.slow_masks(logs, higher_is_better=False)["base"].any()        # a low latency is not slow
    kept, unsure = slow.leave_out(logs)
    assert kept["base"].size == 3 and not unsure
    kept, unsure = slow.leave_out({**logs, "a": np.log([100.0, 65.0])})
    assert kept["a"].size == 2 and unsure == {"a"}           # which of two is the slow one cannot be told
    noisy = slow.slow_masks({**logs, "n": np.log([100.0, 80.0, 125.0, 60.0])})["n"]
    assert not noisy.any()                    # a cell noisy on its own is judged by its own spread
