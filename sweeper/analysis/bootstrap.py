"""Bootstrap intervals over timing samples: pure functions over plain sequences.

Percentile intervals of a ratio between two samples, of a ratio of items/s (measure/rules.py's
rule), and a cell's figures over a two-level bootstrap (repeats, then steps within each) that
keeps the spread between processes. NaN marks a failed measurement and is dropped first.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence, Union

import numpy as np

from sweeper.measure.rules import items_per_second

Statistic = Union[str, Callable[..., float]]


def clean(samples: Sequence[float]) -> np.ndarray:
    """1-D float array with NaNs (failed measurements) removed."""
    x = np.asarray(samples, dtype=float).ravel()
    return x[~np.isnan(x)]



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
    a, b = clean(a), clean(b)
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan, math.nan
    ratio_fn = _ratio_of(_statistic(statistic))
    ratio = float(ratio_fn(a, b))
    if a.size < 2 or b.size < 2:
        return ratio, math.nan, math.nan
    from scipy.stats import bootstrap    # here, when used: importing scipy.stats costs seconds

    res = bootstrap((a, b), ratio_fn, n_resamples=n_resamples, confidence_level=confidence,
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


# A cell's figures: per-repeat ones (the median over repeats of each repeat's figure: what
# the verdicts compare) and pooled ones (the spread of all its measured steps).
REPEAT_FIGURES = ("p50", "p95", "items_per_s")
POOLED_FIGURES = ("mean", "std", "cv")


def _median_rows(values: np.ndarray) -> np.ndarray:
    return np.nanmedian(values, axis=-1) if values.size else np.full(values.shape[0], np.nan)


def cell_intervals(repeat_seconds: Sequence[Sequence[float]], repeat_items: Sequence[Sequence[float]],
                   confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                   repeat_counted: Optional[Sequence[Sequence[float]]] = None) -> Dict[str, tuple[float, float]]:
    """(low, high) of a cell's figures over one two-level bootstrap (repeats, then steps within
    each; one set of indices for all figures):

    - p50, p95, items_per_s: the median over repeats of each repeat's figure (items/s of a
      repeat = its items / its counted time, rules.items_per_second), the values the verdicts compare;
    - mean, std, cv: over the cell's pooled steps.

    The points are the cell table's (cells.py). Steps with a NaN time are dropped; items_per_s is
    NaN when a step has no item count. Items/s counts `repeat_counted` seconds (each step's cycle,
    docs/measurement.md) where given, else the steps' own. With one repeat the draw is over its
    steps alone: one process's spread, too narrow to compare cells by (cells.py marks it
    ci_over="steps"); NaN below two steps. Numpy only: a run of one trial imports no scipy.stats."""
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
    if not parts or sum(p[0].size for p in parts) < 2:
        return {name: (math.nan, math.nan) for name in names}
    seconds, items, counted = (np.concatenate([p[k] for p in parts]) for k in range(3))
    draws: Dict[str, list] = {name: [] for name in names}
    for idx, blocks in _hierarchical_indices(np.random.default_rng(seed), [p[0].size for p in parts], n_resamples):
        for name, values in _cell_draws(seconds, items, counted, idx, blocks).items():
            draws[name].append(values)
    return {name: _percentile_interval(np.concatenate(draws[name]), confidence) for name in names}


def _cell_draws(seconds: np.ndarray, items: np.ndarray, counted: np.ndarray, idx: np.ndarray,
                blocks) -> Dict[str, np.ndarray]:
    s, i = seconds[idx], items[idx]
    out = {"p50": _median_rows(_per_repeat(_p50, blocks, s)),
           "p95": _median_rows(_per_repeat(_p95, blocks, s)),
           "items_per_s": _median_rows(_per_repeat(items_per_second, blocks, i, counted[idx]))}
    out.update({name: _STATISTICS[name](s, axis=-1) for name in POOLED_FIGURES})
    return out
