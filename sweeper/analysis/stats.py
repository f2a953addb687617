"""Statistics over timing samples: pure functions over plain sequences.

The unit of evidence is the repeat (one trial process), not the step. Steps of
one process are autocorrelated and share that process's luck, so a test over
pooled steps overstates significance (A/A pairs flagged 68-75% of the time on
our hosts). `compare_cells` therefore takes one value per repeat.

NaN marks a failed measurement (a failed trial is a row with NaN metrics) and
is dropped before any statistic is computed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Union

import numpy as np
from scipy import stats

Statistic = Union[str, Callable[..., float]]

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no detectable change"
TOO_FEW = "too few repeats"
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


def _clean(samples: Sequence[float]) -> np.ndarray:
    """1-D float array with NaNs (failed measurements) removed."""
    x = np.asarray(samples, dtype=float).ravel()
    return x[~np.isnan(x)]


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
    x = _clean(samples)
    return float(np.percentile(x, q)) if x.size else math.nan


def describe(samples: Sequence[float]) -> Summary:
    """Summary of samples; never raises (empty input gives n=0 and NaNs)."""
    x = _clean(samples)
    if x.size == 0:
        return Summary(0, *([math.nan] * 7))
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if x.size > 1 else math.nan
    cv = std / mean if mean != 0 else math.nan
    p50, p95 = np.percentile(x, [50, 95])
    return Summary(int(x.size), mean, std, cv, float(p50), float(p95),
                   float(x.min()), float(x.max()))


def mean_rel_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the Student-t interval of the mean, as a fraction of the mean.

    BenchmarkDotNet's stopping figure: a cell has run enough repeats once this falls under
    its target (2%). Over repeats (one value each), where a bootstrap of 3-5 values is
    too coarse. NaN with fewer than two values or a mean of zero."""
    x = _clean(samples)
    if x.size < 2 or np.mean(x) == 0:
        return math.nan
    sem = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    return float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * sem / abs(np.mean(x)))


# --------------------------------------------------------------------------- bootstrap


def _p50(x, axis=-1):
    return np.percentile(x, 50, axis=axis)


def _p95(x, axis=-1):
    return np.percentile(x, 95, axis=axis)


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


def _std(x, axis=-1):
    return np.std(x, axis=axis, ddof=1)


def _cv(x, axis=-1):
    return np.std(x, axis=axis, ddof=1) / np.mean(x, axis=axis)


_STATISTICS = {"p50": _p50, "p95": _p95, "mean": _mean, "std": _std, "cv": _cv}


def _statistic(statistic: Statistic) -> Callable:
    if callable(statistic):
        return statistic
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(_STATISTICS)} or a callable, "
                         f"got {statistic!r}")
    return _STATISTICS[statistic]


def _bootstrap_method(statistic: Statistic) -> str:
    # BCa is unreliable for quantiles (its jackknife acceleration is erratic for a
    # non-smooth statistic), so quantiles and unknown callables use the plain
    # percentile interval; the mean is smooth and gets BCa.
    return "BCa" if statistic == "mean" else "percentile"


def bootstrap_ci(samples: Sequence[float], statistic: Statistic = "p50",
                 confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Bootstrap confidence interval of a statistic; (nan, nan) below 2 samples."""
    x = _clean(samples)
    if x.size < 2:
        return math.nan, math.nan
    res = stats.bootstrap((x,), _statistic(statistic), n_resamples=n_resamples,
                          confidence_level=confidence, method=_bootstrap_method(statistic),
                          rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _items_per_second(items, seconds, axis=-1):
    return np.sum(items, axis=axis) / np.sum(seconds, axis=axis)


def throughput_ci(step_seconds: Sequence[float], items_per_step: Union[float, Sequence[float]],
                  confidence: float = 0.95, n_resamples: int = 2000,
                  seed: int = 0) -> tuple[float, float, float]:
    """Items/s as total items / total time, with a bootstrap interval over steps.

    Steps are resampled as (seconds, items) pairs. Steps are autocorrelated, so the
    interval reflects one run's step noise only: compare cells over repeats instead.
    """
    seconds = np.asarray(step_seconds, dtype=float).ravel()
    items = np.broadcast_to(np.asarray(items_per_step, dtype=float), seconds.shape)
    keep = ~(np.isnan(seconds) | np.isnan(items))
    seconds, items = seconds[keep], items[keep]
    if seconds.size == 0:
        return math.nan, math.nan, math.nan
    point = float(_items_per_second(items, seconds))
    if seconds.size < 2:
        return point, math.nan, math.nan
    res = stats.bootstrap((items, seconds), _items_per_second, paired=True,
                          n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", rng=np.random.default_rng(seed))
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def ratio_of_medians_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
                        n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """median(b) / median(a) with a bootstrap interval (each group resampled on its own)."""
    return ratio_ci(a, b, _median, confidence, n_resamples, seed)


def _ratio_of(fn):
    def ratio(a, b, axis=-1):
        return fn(b, axis=axis) / fn(a, axis=axis)
    return ratio


def ratio_ci(a: Sequence[float], b: Sequence[float], statistic: Statistic = "p50",
             confidence: float = 0.95, n_resamples: int = 2000,
             seed: int = 0) -> tuple[float, float, float]:
    """statistic(b) / statistic(a) with a percentile bootstrap interval, each group on its own.

    Over the steps of single processes this interval ignores the process-to-process
    spread (see the module docstring): it is a weaker check than `compare_cells`.
    """
    a, b = _clean(a), _clean(b)
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan, math.nan
    ratio_fn = _ratio_of(_statistic(statistic))
    ratio = float(ratio_fn(a, b))
    if a.size < 2 or b.size < 2:
        return ratio, math.nan, math.nan
    res = stats.bootstrap((a, b), ratio_fn, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", rng=np.random.default_rng(seed))
    return ratio, float(res.confidence_interval.low), float(res.confidence_interval.high)


def throughput_ratio_ci(a_seconds: Sequence[float], a_items: Union[float, Sequence[float]],
                        b_seconds: Sequence[float], b_items: Union[float, Sequence[float]],
                        confidence: float = 0.95, n_resamples: int = 2000,
                        seed: int = 0) -> tuple[float, float, float]:
    """Items/s of b / items/s of a (each total items / total time), with a percentile
    bootstrap interval resampling each side's (seconds, items) steps on its own.

    Over the steps of single processes, like `ratio_ci`: a weaker check than `compare_cells`."""
    sides = []
    for seconds, items in ((a_seconds, a_items), (b_seconds, b_items)):
        s = np.asarray(seconds, dtype=float).ravel()
        i = np.broadcast_to(np.asarray(items, dtype=float), s.shape)
        keep = ~(np.isnan(s) | np.isnan(i))
        sides.append((s[keep], i[keep]))
    (sa, ia), (sb, ib) = sides
    if sa.size == 0 or sb.size == 0:
        return math.nan, math.nan, math.nan
    ratio = float((ib.sum() / sb.sum()) / (ia.sum() / sa.sum()))
    if sa.size < 2 or sb.size < 2:
        return ratio, math.nan, math.nan
    rng = np.random.default_rng(seed)
    ka, kb = rng.integers(sa.size, size=(n_resamples, sa.size)), rng.integers(sb.size, size=(n_resamples, sb.size))
    draws = (ib[kb].sum(axis=1) / sb[kb].sum(axis=1)) / (ia[ka].sum(axis=1) / sa[ka].sum(axis=1))
    return (ratio, *_percentile_interval(draws, confidence))


# Values drawn per chunk of resamples: keeps a vectorised two-level bootstrap under ~100 MB.
_CHUNK_VALUES = 4_000_000


def _hierarchical_indices(rng: np.random.Generator, sizes: Sequence[int], n_resamples: int):
    """Chunks of (resamples, values) indices into the concatenated repeats: each row draws
    repeats with replacement, then steps with replacement within each drawn repeat.
    Yields (indices, blocks): blocks is the number of repeats when they are all the same
    size (each row is r equal blocks), else the drawn repeats' sizes (one row)."""
    sizes = np.asarray(sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    r = sizes.size
    if np.all(sizes == sizes[0]):
        n = int(sizes[0])
        chunk = max(1, _CHUNK_VALUES // (r * n))
        for done in range(0, n_resamples, chunk):
            k = min(chunk, n_resamples - done)
            picked = rng.integers(r, size=(k, r, 1))
            yield (starts[picked] + rng.integers(n, size=(k, r, n))).reshape(k, r * n), r
        return
    for _ in range(n_resamples):   # unequal repeats: one resample at a time
        picked = rng.integers(r, size=r)
        yield (np.concatenate([starts[i] + rng.integers(sizes[i], size=sizes[i]) for i in picked])[None, :],
               sizes[picked])


def _per_repeat(fn, blocks, *samples) -> np.ndarray:
    """fn over each drawn repeat of resampled rows: (resamples, repeats)."""
    if np.isscalar(blocks):
        return fn(*(x.reshape(x.shape[0], int(blocks), -1) for x in samples), axis=-1)
    cuts = np.cumsum(blocks)[:-1]
    parts = zip(*(np.split(x[0], cuts) for x in samples))
    return np.array([[float(fn(*p)) for p in parts]])


def _percentile_interval(values: Sequence[float], confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.nanpercentile(np.asarray(values, dtype=float), [tail, 100 - tail])
    return float(low), float(high)


def hierarchical_ci(repeats: Sequence[Sequence[float]], statistic: Statistic = "p50",
                    confidence: float = 0.95, n_resamples: int = 2000,
                    seed: int = 0) -> tuple[float, float, float]:
    """A statistic of one cell's pooled steps, with a two-level bootstrap interval.

    (point, low, high); the bounds are nan below 2 repeats, where only a bootstrap over
    steps is possible and it would hide the between-process spread.
    """
    return hierarchical_cis(repeats, [statistic], confidence, n_resamples, seed)[statistic]


def hierarchical_cis(repeats: Sequence[Sequence[float]], statistics: Sequence[Statistic],
                     confidence: float = 0.95, n_resamples: int = 2000,
                     seed: int = 0) -> Dict[Statistic, tuple[float, float, float]]:
    """`hierarchical_ci` of several statistics over the same resamples: the indices are
    drawn once (they are most of the cost) and each statistic gets the draws it would get alone."""
    fns = {name: _statistic(name) for name in statistics}
    parts = [x for x in map(_clean, repeats) if x.size]
    if not parts:
        return {name: (math.nan, math.nan, math.nan) for name in fns}
    pooled = np.concatenate(parts)
    points = {name: float(fn(pooled)) for name, fn in fns.items()}
    if len(parts) < 2:
        return {name: (points[name], math.nan, math.nan) for name in fns}
    draws: Dict[Statistic, list] = {name: [] for name in fns}
    for idx, _ in _hierarchical_indices(np.random.default_rng(seed), [p.size for p in parts], n_resamples):
        sample = pooled[idx]
        for name, fn in fns.items():
            draws[name].append(fn(sample, axis=-1))
    return {name: (points[name], *_percentile_interval(np.concatenate(d), confidence)) for name, d in draws.items()}


# A cell's figures: per-repeat ones (the median over repeats of each repeat's figure: what
# the verdicts compare) and pooled ones (the spread of all its measured steps).
REPEAT_FIGURES = {"p50": _p50, "p95": _p95, "items_per_s": _items_per_second}
POOLED_FIGURES = ("mean", "std", "cv")


def _median_rows(values: np.ndarray) -> np.ndarray:
    return np.nanmedian(values, axis=-1) if values.size else np.full(values.shape[0], np.nan)


def cell_cis(repeat_seconds: Sequence[Sequence[float]], repeat_items: Sequence[Sequence[float]],
             confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0,
             repeat_counted: Optional[Sequence[Sequence[float]]] = None) -> Dict[str, tuple[float, float, float]]:
    """(point, low, high) of a cell's figures over one two-level bootstrap (repeats, then
    steps within each; one set of indices for all figures):

    - p50, p95, items_per_s: the median over repeats of each repeat's figure (items/s of a
      repeat = its items / its time), the values the verdicts compare;
    - mean, std, cv: over the cell's pooled steps.

    Steps with a NaN time are dropped; items_per_s is NaN when a step has no item count. Items/s
    counts `repeat_counted` seconds (each step's cycle, docs/measurement.md) where given, else
    the steps' own. Bounds are NaN below 2 repeats (a bootstrap over one process's steps hides
    the spread between processes: use `bootstrap_ci` / `throughput_ci` there and say so)."""
    parts = []
    counted_all = repeat_seconds if repeat_counted is None else repeat_counted
    for seconds, items, counted in zip(repeat_seconds, repeat_items, counted_all):
        s = np.asarray(seconds, dtype=float).ravel()
        i = np.broadcast_to(np.asarray(items, dtype=float), s.shape)
        c = np.asarray(counted, dtype=float).ravel()
        keep = ~np.isnan(s)
        if keep.any():
            parts.append((s[keep], i[keep], c[keep]))
    names = list(REPEAT_FIGURES) + list(POOLED_FIGURES)
    if not parts:
        return {name: (math.nan, math.nan, math.nan) for name in names}
    seconds, items, counted = (np.concatenate([p[k] for p in parts]) for k in range(3))
    sizes = [p[0].size for p in parts]
    full = (np.arange(seconds.size)[None, :], sizes if len(set(sizes)) > 1 else len(sizes))
    points = _cell_draws(seconds, items, counted, *full)
    points = {name: float(v[0]) for name, v in points.items()}
    if len(parts) < 2:
        return {name: (points[name], math.nan, math.nan) for name in names}
    draws: Dict[str, list] = {name: [] for name in names}
    for idx, blocks in _hierarchical_indices(np.random.default_rng(seed), sizes, n_resamples):
        for name, values in _cell_draws(seconds, items, counted, idx, blocks).items():
            draws[name].append(values)
    return {name: (points[name], *_percentile_interval(np.concatenate(draws[name]), confidence))
            for name in names}


def _cell_draws(seconds: np.ndarray, items: np.ndarray, counted: np.ndarray, idx: np.ndarray,
                blocks) -> Dict[str, np.ndarray]:
    s, i = seconds[idx], items[idx]
    out = {"p50": _median_rows(_per_repeat(_p50, blocks, s)),
           "p95": _median_rows(_per_repeat(_p95, blocks, s)),
           "items_per_s": _median_rows(_per_repeat(_items_per_second, blocks, i, counted[idx]))}
    out.update({name: _STATISTICS[name](s, axis=-1) for name in POOLED_FIGURES})
    return out


def _resample_repeats(rng: np.random.Generator, repeats: list[np.ndarray]) -> np.ndarray:
    """One hierarchical resample: draw repeats, then steps within each drawn repeat."""
    picked = rng.integers(len(repeats), size=len(repeats))
    drawn = [repeats[i] for i in picked]
    return np.concatenate([r[rng.integers(r.size, size=r.size)] for r in drawn])


def hierarchical_bootstrap_ci(repeats_a: Sequence[Sequence[float]],
                              repeats_b: Sequence[Sequence[float]],
                              statistic: Statistic = "p50", confidence: float = 0.95,
                              n_resamples: int = 2000, seed: int = 0
                              ) -> tuple[float, float, float]:
    """Ratio b/a of a statistic over pooled steps, with a two-level bootstrap interval.

    Resampling repeats first keeps the between-process spread in the interval, which
    a bootstrap over pooled steps would hide. (nan bounds below 2 repeats a side.)
    """
    fn = _statistic(statistic)
    a = [x for x in map(_clean, repeats_a) if x.size]
    b = [x for x in map(_clean, repeats_b) if x.size]
    if not a or not b:
        return math.nan, math.nan, math.nan
    ratio = float(fn(np.concatenate(b)) / fn(np.concatenate(a)))
    if len(a) < 2 or len(b) < 2:
        return ratio, math.nan, math.nan
    rng = np.random.default_rng(seed)
    ratios = [fn(_resample_repeats(rng, b)) / fn(_resample_repeats(rng, a))
              for _ in range(n_resamples)]
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return ratio, float(low), float(high)


# --------------------------------------------------------------------------- effect sizes, p-values


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """P(a > b) - P(a < b) over all pairs, in [-1, 1]; positive: a tends to be larger."""
    a, b = _clean(a), _clean(b)
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
        method = stats.PermutationMethod(n_resamples=arrangements)
    else:
        method = "asymptotic"
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def _rank_sum_permutation_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact permutation p of the rank sum (mid-ranks for ties), every arrangement
    enumerated: for the small tied samples scipy will not take (one value a side)."""
    import itertools

    pooled = np.concatenate([a, b])
    ranks = stats.rankdata(pooled)
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
    a, b = _clean(a_repeats), _clean(b_repeats)
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
