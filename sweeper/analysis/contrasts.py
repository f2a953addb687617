"""The test a look of repeats=auto makes: one cell against a reference on the log of each repeat's
value (one value per repeat, the unit of evidence), Student's t with the variance pooled over the
stratum's cells; a cell significantly noisier than the rest, or a pair whose own noise counts
(sequential.Evidence.own_noise), is judged with the pair's own variances (Welch's).
docs/analysis.md#repeats-auto gives the method. Pure: numpy arrays in, numbers out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

NOISIER_LEVEL = 0.05                       # a cell's variance above the stratum's at this level: Welch's test


@dataclass(frozen=True)
class Contrast:
    """log(cell) - log(reference): difference of means, its standard error and degrees of freedom."""
    d: float
    se: float
    df: float

    def p(self) -> float:
        if not (self.se > 0 and self.df >= 1):
            return math.nan
        from scipy import stats as sps      # here, when used: importing scipy.stats costs seconds

        return float(2 * sps.t.sf(abs(self.d / self.se), self.df))

    def interval(self, level: float) -> Tuple[float, float]:
        """The ratio interval at two-sided level `level` (exp of the log interval)."""
        if not (self.se > 0 and self.df >= 1 and level > 0):
            return (math.nan, math.nan) if not level > 0 else (0.0, math.inf)
        from scipy import stats as sps

        half = float(sps.t.isf(level / 2, self.df)) * self.se
        return math.exp(self.d - half), math.exp(self.d + half)


def logs(values: Sequence[float]) -> np.ndarray:
    """Logs of the finite positive values (a failed repeat is NaN and left out)."""
    x = np.asarray(values, dtype=float)
    return np.log(x[np.isfinite(x) & (x > 0)])


def _sum_sq(x: np.ndarray) -> float:
    return float(((x - x.mean()) ** 2).sum()) if x.size else 0.0


def pooled(groups: Sequence[np.ndarray]) -> Tuple[float, int]:
    """(variance, degrees of freedom) pooled over groups of log values (one-way ANOVA's)."""
    used = [g for g in groups if g.size]
    df = sum(g.size for g in used) - len(used)
    return (sum(_sum_sq(g) for g in used) / df, df) if df > 0 else (math.nan, 0)


def welch(cell: np.ndarray, ref: np.ndarray) -> Tuple[float, float]:
    """(standard error, Welch-Satterthwaite degrees of freedom) of the difference of the two means,
    each with its own variance; (NaN, 0) without two values a side."""
    if cell.size < 2 or ref.size < 2:
        return math.nan, 0.0
    a, b = cell.var(ddof=1) / cell.size, ref.var(ddof=1) / ref.size
    if not a + b > 0:
        return 0.0, 0.0
    df = (a + b) ** 2 / (a * a / (cell.size - 1) + b * b / (ref.size - 1))
    return math.sqrt(a + b), float(df)


def noisier(cell: np.ndarray, stratum: Tuple[float, int]) -> bool:
    """Whether the cell's own variance is significantly above the rest of the stratum's pooled one
    (one-sided F test at NOISIER_LEVEL): its quieter neighbours' noise would then flatter it."""
    var, df = stratum
    own_df, rest_df = cell.size - 1, df - (cell.size - 1)
    if own_df < 1 or rest_df < 1 or not var > 0:
        return False
    own = cell.var(ddof=1)
    rest = (var * df - own * own_df) / rest_df
    if not rest > 0:
        return True
    from scipy import stats as sps

    return bool(sps.f.sf(own / rest, own_df, rest_df) < NOISIER_LEVEL)


def contrast(cell: np.ndarray, ref: np.ndarray, stratum: Tuple[float, int], own: bool = False) -> Contrast:
    """cell against ref with the stratum's pooled variance; a cell significantly noisier than the
    rest (`noisier`), or a pair whose own noise counts (`own`: Evidence.own_noise), is judged with
    the pair's own variances instead (Welch's), when that gives the larger standard error. Not always Welch's: with 2 repeats a side it has 1 to 3
    degrees of freedom, and its t quantile would hide every effect the pooled test sees."""
    if not (cell.size and ref.size):
        return Contrast(math.nan, math.nan, 0)
    var, df = stratum
    se = math.sqrt(var * (1 / cell.size + 1 / ref.size)) if df > 0 else math.nan
    if own or noisier(cell, stratum):
        pair_se, pair_df = welch(cell, ref)
        if pair_df > 0 and not pair_se <= se:
            se, df = pair_se, pair_df
    return Contrast(float(cell.mean() - ref.mean()), se, df)
