"""Tests for sweeper.analysis.stats: pinned numbers, scipy called directly, symmetry."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from sweeper.analysis import bootstrap, stats

SAMPLES = [3.1, 2.7, 2.9, 3.4, 5.0, 2.8, 3.0, 3.3, 2.95, 3.05]


def _lognormal(seed, n, median=0.045, cv=0.02):
    return median * np.exp(np.random.default_rng(seed).normal(0.0, cv, n))


def _simulate_steps(rng, shape, steps=100, phi=0.6, step_cv=0.05, process_cv=0.07):
    """Step times of shape + (steps,): AR(1) step noise around a per-process offset."""
    offset = rng.normal(0.0, process_cv, shape + (1,))
    shocks = rng.normal(0.0, step_cv * math.sqrt(1 - phi**2), shape + (steps,))
    noise = np.empty_like(shocks)
    noise[..., 0] = rng.normal(0.0, step_cv, shape)  # start in the stationary state
    for t in range(1, steps):
        noise[..., t] = phi * noise[..., t - 1] + shocks[..., t]
    return 0.045 * np.exp(offset + noise)


# --------------------------------------------------------------------------- describe, percentile


def test_describe_matches_numpy():
    s = stats.describe(SAMPLES)
    x = np.array(SAMPLES)
    assert s.n == 10
    assert s.mean == pytest.approx(np.mean(x))
    assert s.std == pytest.approx(np.std(x, ddof=1))
    assert s.cv == pytest.approx(np.std(x, ddof=1) / np.mean(x))
    assert s.p50 == pytest.approx(np.percentile(x, 50))
    assert s.p95 == pytest.approx(np.percentile(x, 95))
    assert (s.min, s.max) == (2.7, 5.0)


def test_describe_pinned():
    s = stats.describe([1.0, 2.0, 3.0, 4.0])
    assert (s.mean, s.p50, s.p95) == pytest.approx((2.5, 2.5, 3.85))
    assert s.std == pytest.approx(math.sqrt(5 / 3))


def test_describe_empty_and_single():
    empty = stats.describe([])
    assert empty.n == 0
    assert all(math.isnan(getattr(empty, f)) for f in
               ("mean", "std", "cv", "p50", "p95", "min", "max"))
    one = stats.describe([0.5])
    assert (one.n, one.mean, one.p50, one.p95, one.min, one.max) == (1, *[0.5] * 5)
    assert math.isnan(one.std) and math.isnan(one.cv)


def test_describe_drops_failed_measurements():
    assert stats.describe([1.0, math.nan, 3.0]) == stats.describe([1.0, 3.0])


@pytest.mark.parametrize("q, expected", [(0, 1.0), (25, 1.75), (50, 2.5), (90, 3.7), (100, 4.0)])
def test_percentile_interpolates_linearly_between_order_statistics(q, expected):
    # n = 4: the q-th percentile sits at rank q/100 * 3 between the sorted values 1, 2, 3, 4
    assert stats.percentile([4.0, 1.0, 3.0, 2.0], q) == pytest.approx(expected)
    assert stats.percentile([1.0, math.nan, 2.0, 3.0, 4.0], q) == pytest.approx(expected)   # a failed step left out


def test_percentile_pinned_and_empty():
    assert stats.percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert math.isnan(stats.percentile([], 50))


# --------------------------------------------------------------------------- bootstrap


def test_one_repeat_intervals_are_over_its_steps_and_cover_each_figure():
    steps = _simulate_steps(np.random.default_rng(5), (1,))[0]                # one process, 100 steps
    cis = bootstrap.cell_intervals([steps], [np.full(steps.size, 32.0)], n_resamples=500, seed=3)
    points = {"p50": np.percentile(steps, 50), "p95": np.percentile(steps, 95), "items_per_s": 3200 / steps.sum(),
              "mean": steps.mean(), "std": steps.std(ddof=1), "cv": steps.std(ddof=1) / steps.mean()}
    for name, (low, high) in cis.items():
        assert low < points[name] < high, name
    again = bootstrap.cell_intervals([steps], [np.full(steps.size, 32.0)], n_resamples=500, seed=4)
    assert again["p50"] != cis["p50"]                                           # the seed is used
    assert all(math.isnan(v) for pair in bootstrap.cell_intervals([[0.5]], [[10.0]]).values() for v in pair)
    assert all(math.isnan(v) for pair in bootstrap.cell_intervals([], []).values() for v in pair)


def test_ratio_intervals_cover_the_true_ratio_and_name_their_point():
    """Two log-normal samples 30% apart in scale: the ratio of their medians, and of their p95s, is
    1.3 exactly; a 95% percentile interval should hold it in about 95 of 100 draws."""
    rng, hits = np.random.default_rng(0), {"p50": 0, "p95": 0}
    for draw in range(100):
        a, b = 0.01 * np.exp(rng.normal(0, 0.1, 40)), 0.013 * np.exp(rng.normal(0, 0.1, 50))
        for statistic in hits:
            ratio, low, high = bootstrap.ratio_ci(a, b, statistic, n_resamples=500, seed=draw)
            hits[statistic] += low <= 1.3 <= high
    assert hits["p50"] >= 85 and hits["p95"] >= 80, hits
    ratio, low, high = bootstrap.ratio_of_medians_ci(a, b, n_resamples=500, seed=1)
    assert ratio == pytest.approx(np.median(b) / np.median(a)) and low < ratio < high
    assert bootstrap.ratio_ci(a, b, "p95")[0] == pytest.approx(np.percentile(b, 95) / np.percentile(a, 95))
    assert bootstrap.ratio_of_medians_ci(a, b, n_resamples=500, seed=2)[1:] != (low, high)     # the seed is used
    assert all(math.isnan(v) for v in bootstrap.ratio_ci([1.0], [2.0])[1:])


# --------------------------------------------------------------------------- effect size, holm


def test_cliffs_delta_hand_computed():
    # pairs (a, b): (1,2)- (1,4)- (2,2)0 (2,4)- (3,2)+ (3,4)-  ->  (1 - 4) / 6
    assert stats.cliffs_delta([1, 2, 3], [2, 4]) == pytest.approx(-0.5)
    assert stats.cliffs_delta([2, 4], [1, 2, 3]) == pytest.approx(0.5)
    assert stats.cliffs_delta([5, 6], [1, 2]) == 1.0
    assert math.isnan(stats.cliffs_delta([], [1.0]))


def test_holm_hand_computed():
    # sorted 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_holm_nan_passthrough_cap_and_empty():
    out = stats.holm([0.01, math.nan, 0.04, 0.03])
    assert math.isnan(out[1])
    assert [out[0], out[2], out[3]] == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.6, 0.7]) == [1.0, 1.0]
    assert stats.holm([]) == []


def test_min_achievable_p():
    assert stats.min_achievable_p(3, 3) == pytest.approx(0.1)
    assert stats.min_achievable_p(4, 4) == pytest.approx(2 / 70)
    assert stats.min_achievable_p(0, 5) == 1.0
    # complete separation reaches the floor exactly
    p = sps.mannwhitneyu([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], method="exact").pvalue
    assert stats.min_achievable_p(5, 5) == pytest.approx(p) == pytest.approx(2 / 252)


# --------------------------------------------------------------------------- compare_cells


def test_compare_cells_pinned():
    # a > b in 1 of 16 pairs (5 > 4): U = 1, P(U <= 1) = 2/70, two-sided 4/70
    c = stats.compare_cells([1, 2, 3, 5], [4, 6, 7, 8])
    assert (c.n_a, c.n_b) == (4, 4)
    assert c.p_value == pytest.approx(4 / 70)
    assert c.cliffs_delta == pytest.approx(-14 / 16)
    assert c.ratio == pytest.approx(6.5 / 2.5)
    assert c.p_adjusted == c.p_value
    assert c.verdict == stats.NO_CHANGE  # 0.057 > alpha


@pytest.mark.parametrize("a, b, p", [
    ([1, 2, 3], [4, 5, 6], 2 / 20),                   # U = 0: 1 of C(6, 3) = 20 arrangements each way
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 2 / 252),     # U = 0 of C(10, 5) = 252
    ([1, 2, 3, 6], [4, 5, 7, 8], 8 / 70),             # U = 2: 4 of 70 arrangements have U <= 2, both tails
])
def test_compare_cells_p_is_the_exact_mann_whitney_count(a, b, p):
    assert stats.compare_cells(a, b).p_value == pytest.approx(p)
    assert stats.compare_cells(b, a).p_value == pytest.approx(p)                      # two-sided: symmetric
    assert stats.compare_cells(np.log(a), np.log(b)).p_value == pytest.approx(p)      # ranks only


def test_compare_cells_ties_use_exact_permutation():
    a, b = [1, 2, 2, 3, 5], [2, 4, 6, 7, 8]
    ref = sps.mannwhitneyu(a, b, method=sps.PermutationMethod(n_resamples=252)).pvalue
    assert stats.compare_cells(a, b).p_value == pytest.approx(ref)


@pytest.mark.parametrize("shift", [1.10, 1.01])
def test_compare_cells_symmetry(shift):
    a, b = _lognormal(20, 8), _lognormal(21, 8) * shift
    ab, ba = stats.compare_cells(a, b), stats.compare_cells(b, a)
    assert ab.p_value == pytest.approx(ba.p_value, rel=1e-12)
    assert ab.ratio == pytest.approx(1 / ba.ratio)
    assert ab.cliffs_delta == -ba.cliffs_delta
    swapped = {stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER}
    assert ba.verdict == swapped.get(ab.verdict, ab.verdict)
    assert ab.verdict == (stats.SLOWER if shift > 1.05 else stats.NO_CHANGE)


def test_known_shift_detected():
    a, b = _lognormal(30, 8), _lognormal(31, 8) * 1.10
    c = stats.compare_cells(a, b)
    assert c.verdict == stats.SLOWER
    assert c.p_value < 0.01 and c.ratio_low > 1.0
    assert stats.compare_cells(b, a).verdict == stats.FASTER


def test_identical_distributions_not_flagged():
    rng = np.random.default_rng(40)
    a, b = 0.045 * np.exp(rng.normal(0, 0.02, (2, 8)))
    c = stats.compare_cells(a, b)
    assert c.verdict == stats.NO_CHANGE
    assert c.ratio_low < 1.0 < c.ratio_high


def test_compare_cells_drops_failed_repeats():
    c = stats.compare_cells([1.0, math.nan, 1.1, 1.2], [2.0, 2.1, 2.2, math.nan, 2.3])
    assert (c.n_a, c.n_b) == (3, 4)
    assert c.p_value == sps.mannwhitneyu([1.0, 1.1, 1.2], [2.0, 2.1, 2.2, 2.3],
                                         method="exact").pvalue


def test_three_vs_three_is_too_few():
    c = stats.compare_cells([1.0, 1.01, 1.02], [2.0, 2.01, 2.02])
    assert c.p_value == pytest.approx(0.1)
    assert c.verdict == stats.TOO_FEW


def test_significant_but_smaller_than_min_effect_reads_within():
    a = [1.00, 1.001, 1.002, 1.003, 1.004, 1.005, 1.006, 1.007]
    b = [x * 1.03 for x in a]
    c = stats.compare_cells(a, b)
    assert c.p_value < 0.001
    assert c.verdict == "within 5%" == stats.within(0.05) and c.verdict.startswith(stats.WITHIN)
    assert stats.decide(c, alpha=0.05, min_effect=0.02) == stats.SLOWER
    assert stats.decide(c, alpha=0.05, min_effect=0.1) == "within 10%"
    not_significant = dataclasses.replace(c, p_adjusted=0.2)
    assert stats.decide(not_significant) == stats.NO_CHANGE


@pytest.mark.parametrize("shift", [1.10, 0.90])
def test_higher_is_better_flips_the_direction_not_the_ratio(shift):
    # items/s of b 10% above (or below) a's: larger is faster for throughput
    a, b = _lognormal(20, 8), _lognormal(21, 8) * shift
    lower = stats.compare_cells(a, b)
    higher = stats.compare_cells(a, b, higher_is_better=True)
    assert higher.ratio == lower.ratio and higher.p_value == lower.p_value
    assert higher.cliffs_delta == lower.cliffs_delta                      # P(a > b) - P(a < b), on the values
    expected = stats.FASTER if shift > 1 else stats.SLOWER
    assert higher.verdict == expected
    assert lower.verdict == {stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER}[expected]
    assert stats.compare_cells(b, a, higher_is_better=True).verdict == lower.verdict   # swapping swaps it


def test_apply_holm_decides_again():
    raw = [stats.Comparison(8, 8, p, 1.2, 1.1, 1.3, 0.9) for p in (0.01, 0.04, 0.03)]
    raw = [dataclasses.replace(c, verdict=stats.decide(c)) for c in raw]
    assert [c.verdict for c in raw] == [stats.SLOWER] * 3
    adjusted = stats.apply_holm(raw)
    assert [c.p_adjusted for c in adjusted] == pytest.approx([0.03, 0.06, 0.06])
    assert [c.p_value for c in adjusted] == [0.01, 0.04, 0.03]
    assert [c.verdict for c in adjusted] == [stats.SLOWER, stats.NO_CHANGE, stats.NO_CHANGE]


# --------------------------------------------------------------------------- the repeat is the unit


def test_aa_false_positive_rate_repeats_vs_pooled_steps():
    pairs, repeats, alpha = 300, 5, 0.05
    steps = _simulate_steps(np.random.default_rng(2024), (pairs, 2, repeats))
    per_repeat_p50 = np.median(steps, axis=-1)
    verdicts = [stats.compare_cells(a, b, alpha=alpha, n_resamples=100).verdict
                for a, b in per_repeat_p50]
    repeat_rate = np.mean([v in (stats.FASTER, stats.SLOWER) for v in verdicts])
    pooled = steps.reshape(pairs, 2, -1)
    pooled_p = sps.mannwhitneyu(pooled[:, 0], pooled[:, 1], axis=-1).pvalue
    pooled_rate = np.mean(pooled_p < alpha)
    print(f"A/A flag rate: per-repeat p50 {repeat_rate:.3f}, pooled steps {pooled_rate:.3f}")
    margin = 3 * math.sqrt(alpha * (1 - alpha) / pairs)
    assert repeat_rate <= alpha + margin
    assert pooled_rate > 0.3


# --------------------------------------------------------------------------- one cell, over repeats


def test_cell_intervals_cover_each_figure_and_keep_the_process_spread():
    steps = _simulate_steps(np.random.default_rng(13), (6,))       # 6 repeats x 100 steps
    items = [np.full(100, 32.0)] * 6
    cis = bootstrap.cell_intervals(list(steps), items, n_resamples=500, seed=1)
    points = {"p50": np.median(np.percentile(steps, 50, axis=1)), "p95": np.median(np.percentile(steps, 95, axis=1)),
              "items_per_s": np.median(3200 / steps.sum(axis=1)), "mean": steps.mean(),
              "std": steps.std(ddof=1), "cv": steps.std(ddof=1) / steps.mean()}
    assert set(cis) == set(points)
    for name, (low, high) in cis.items():
        assert low < points[name] < high, name
    flat = bootstrap.cell_intervals([steps.ravel()], [np.full(steps.size, 32.0)], n_resamples=500, seed=1)["p50"]
    assert (flat[1] - flat[0]) < (cis["p50"][1] - cis["p50"][0]) / 2    # steps alone hide the 7% process spread
    # repeats of unequal length take the one-at-a-time path and agree closely
    uneven = [r[: 90 + i] for i, r in enumerate(steps)]
    u = bootstrap.cell_intervals(uneven, [i[: 90 + n] for n, i in enumerate(items)], n_resamples=200, seed=1)
    assert u["items_per_s"][0] == pytest.approx(cis["items_per_s"][0], rel=0.03)
    assert u["p50"][1] == pytest.approx(cis["p50"][1], rel=0.03)


def test_throughput_ratio_ci():
    rng = np.random.default_rng(3)
    a, b = 0.01 * np.exp(rng.normal(0, 0.05, 50)), 0.008 * np.exp(rng.normal(0, 0.05, 60))
    ratio, low, high = bootstrap.throughput_ratio_ci(a, 32, b, 32, n_resamples=1000)
    assert ratio == pytest.approx((32 * 60 / b.sum()) / (32 * 50 / a.sum()))
    assert low < ratio < high and low > 1.1
    back, _, _ = bootstrap.throughput_ratio_ci(b, 32, a, 32)
    assert back == pytest.approx(1 / ratio)
    assert all(math.isnan(v) for v in bootstrap.throughput_ratio_ci([0.1], 1, [0.1], 1)[1:])

