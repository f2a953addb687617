"""Statistics over timing samples: pure functions over plain sequences.

The unit of evidence is the repeat (one trial process), not the step. Steps of
one process are autocorrelated and share that process's luck, so a test over
pooled steps overstates significance (A/A pairs flagged 68-75% of the time on
our hosts). `compare_cells` therefore takes one value per repeat.

NaN marks a failed measurement (a failed trial is a row with NaN metrics) and
is dropped before any statistic is computed. Bootstrap intervals: bootstrap.py.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from sweeper.analysis.bootstrap import clean, ratio_of_medians_ci

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no detectable change"
TOO_FEW = "too few repeats"
NO_BASELINE = "no baseline result"       # the baseline has no value to compare with: every repeat of it failed
WITHIN = "within"      # significant, but smaller than the minimum effect: "within 5%"


def within(min_effect: float) -> str:
    """The verdict of a change that is significant but smaller than `min_effect`."""
    return f"{WITHIN} {min_effect * 100:g}%"

# Exact Mann-Whitney null distribution stays cheap up to here (100 vs 100: ~20 ms);
# past it the normal approximation is indistinguishable.
_EXACT_MAX_N = 100
# With ties the exact null is wrong; enumerate permutations instead while that is cheap
# (8 vs 8 is 12,870 arrangements, ~0.1 s).
_PERMUTATION_MAX = 20_000


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float
    cv: float
    p50: float
    p95: float
    min: float
    max: float


def percentile(samples: Sequence[float], q: float) -> float:
    """q-th percentile (0-100), linear interpolation as numpy's default; NaN if empty."""
    x = clean(samples)
    return float(np.percentile(x, q)) if x.size else math.nan


def describe(samples: Sequence[float]) -> Summary:
    """Summary of samples; never raises (empty input gives n=0 and NaNs)."""
    x = clean(samples)
    if x.size == 0:
        return Summary(0, *([math.nan] * 7))
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if x.size > 1 else math.nan
    cv = std / mean if mean != 0 else math.nan
    p50, p95 = np.percentile(x, [50, 95])
    return Summary(int(x.size), mean, std, cv, float(p50), float(p95),
                   float(x.min()), float(x.max()))


# --------------------------------------------------------------------------- effect sizes, p-values


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """P(a > b) - P(a < b) over all pairs, in [-1, 1]; positive: a tends to be larger."""
    a, b = clean(a), clean(b)
    if a.size == 0 or b.size == 0:
        return math.nan
    return float(np.mean(np.sign(a[:, None] - b[None, :])))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (monotone, capped at 1); NaNs pass through."""
    p = np.asarray(pvalues, dtype=float)
    out = p.copy()
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = order.size
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out.tolist()


def min_achievable_p(n_a: int, n_b: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value possible with these sizes."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def _mannwhitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney p: exact where it is valid and cheap.

    Repeats are few (3-20), where the normal approximation is poor and its p-values
    can fall below what the sizes allow. The exact null assumes no ties, so with ties
    the permutations are enumerated; only large samples use the normal approximation.
    """
    from scipy.stats import PermutationMethod, mannwhitneyu

    pooled = np.concatenate([a, b])
    if np.unique(pooled).size == 1:       # no spread at all: nothing tells the two apart
        return 1.0
    ties = np.unique(pooled).size < a.size + b.size
    arrangements = math.comb(a.size + b.size, a.size)
    if ties and min(a.size, b.size) < 2:  # scipy's permutation test wants 2 values a side
        return _rank_sum_permutation_p(a, b)
    if not ties and max(a.size, b.size) <= _EXACT_MAX_N:
        method = "exact"
    elif ties and arrangements <= _PERMUTATION_MAX:
        method = PermutationMethod(n_resamples=arrangements)
    else:
        method = "asymptotic"
    return float(mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def _rank_sum_permutation_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact permutation p of the rank sum (mid-ranks for ties), every arrangement
    enumerated: for the small tied samples scipy will not take (one value a side)."""
    import itertools

    from scipy.stats import rankdata

    pooled = np.concatenate([a, b])
    ranks = rankdata(pooled)
    centre = a.size * (pooled.size + 1) / 2.0
    observed = abs(ranks[:a.size].sum() - centre)
    sums = np.array([ranks[list(c)].sum() for c in itertools.combinations(range(pooled.size), a.size)])
    return float(np.mean(np.abs(sums - centre) >= observed - 1e-9))


# --------------------------------------------------------------------------- comparing cells


@dataclass(frozen=True)
class Comparison:
    """A vs B over per-repeat values; ratio = median(b) / median(a).

    Lower is better (step times) unless `higher_is_better` (throughput): "faster" always
    means b is better than a, whichever way its values move."""
    n_a: int
    n_b: int
    p_value: float
    ratio: float
    ratio_low: float
    ratio_high: float
    cliffs_delta: float
    verdict: str = ""
    alpha: float = 0.05       # thresholds the verdict was decided with,
    min_effect: float = 0.05  # kept so apply_holm can decide again
    p_adjusted: Optional[float] = None  # None means "not adjusted": the raw p
    higher_is_better: bool = False

    def __post_init__(self):
        if self.p_adjusted is None:
            object.__setattr__(self, "p_adjusted", self.p_value)


def decide(comparison: Comparison, alpha: Optional[float] = None,
           min_effect: Optional[float] = None) -> str:
    """Verdict for b against a; thresholds default to the comparison's own.

    Faster / slower only when significant AND the ratio reaches 1 + min_effect either
    way, as asv does (ratio > 1 + f or ratio < 1 / (1 + f), so swapping a and b swaps
    the verdict exactly). Significant but smaller than that: "within 5%", a real change
    too small to act on. Lower values are better unless the comparison says otherwise.
    """
    alpha = comparison.alpha if alpha is None else alpha
    min_effect = comparison.min_effect if min_effect is None else min_effect
    if min_achievable_p(comparison.n_a, comparison.n_b) >= alpha:
        return TOO_FEW
    r = comparison.ratio
    if not comparison.p_adjusted < alpha or not (r > 0 and math.isfinite(r)):
        return NO_CHANGE
    if r == 1 or max(r, 1 / r) < 1 + min_effect:
        return within(min_effect)
    return FASTER if (r > 1) == comparison.higher_is_better else SLOWER


def compare_cells(a_repeats: Sequence[float], b_repeats: Sequence[float],
                  alpha: float = 0.05, min_effect: float = 0.05, confidence: float = 0.95,
                  n_resamples: int = 2000, seed: int = 0, higher_is_better: bool = False) -> Comparison:
    """Compare two cells over their repeats (one value per repeat: its items/s, or its p50
    step time, ...). `higher_is_better` for throughput, where a larger value is faster."""
    a, b = clean(a_repeats), clean(b_repeats)
    p = _mannwhitney_p(a, b) if a.size and b.size else math.nan
    ratio, low, high = ratio_of_medians_ci(a, b, confidence, n_resamples, seed)
    c = Comparison(int(a.size), int(b.size), p, ratio, low, high, cliffs_delta(a, b),
                   alpha=alpha, min_effect=min_effect, higher_is_better=higher_is_better)
    return dataclasses.replace(c, verdict=decide(c))


def apply_holm(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Holm-adjust p-values across a family of comparisons and decide each again."""
    adjusted = holm([c.p_value for c in comparisons])
    out = [dataclasses.replace(c, p_adjusted=p) for c, p in zip(comparisons, adjusted)]
    return [dataclasses.replace(c, verdict=decide(c)) for c in out]
