"""Group-sequential boundaries: how much of alpha each look may spend, as a nominal level.

Lan and DeMets' alpha spending (1983): a spending function alpha(t) says how much of the
two-sided alpha may be used up by information fraction t (0 < t <= 1). The boundary at
each look is the z that, given the looks before it were not crossed, is crossed with the
probability that look may spend; the probabilities come from the Brownian motion a
sequence of z statistics follows (Armitage, McPherson and Rowe's recursive integration, on
a grid). Jennison and Turnbull (2000, ch. 3.8) then use each boundary as a nominal
significance level for a t-test at that look: what `nominal_levels` returns. Pure, cached.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Sequence, Tuple

import numpy as np

from sweeper.schema.run import SPENDING   # the spending functions sequential.spending may name

_GRID = np.linspace(-9.0, 9.0, 901)       # B-values, B(t) = Z(t) sqrt(t); var B(t) = t <= 1
_STEP = float(_GRID[1] - _GRID[0])
_SQUARED_GAPS = (_GRID[:, None] - _GRID[None, :]) ** 2


def spent(t: float, alpha: float, kind: str = "pocock") -> float:
    """Two-sided alpha spent by information fraction t: Lan-DeMets' Pocock-type
    alpha ln(1 + (e - 1) t), or O'Brien-Fleming-type 2 - 2 Phi(z_{alpha/2} / sqrt(t))."""
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    if kind == "obrien_fleming":
        from scipy import stats      # here, when used: importing scipy.stats costs seconds

        return float(2 * stats.norm.sf(stats.norm.isf(alpha / 2) / math.sqrt(t)))
    raise ValueError(f"spending must be one of {SPENDING}, got {kind!r}")


def _inside_mass(density: np.ndarray, bound: float) -> float:
    """Mass of the density on the grid between -bound and +bound (linear between points)."""
    cumulative = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2) * _STEP])
    edges = np.interp([-bound, bound], _GRID, cumulative)
    return float(edges[1] - edges[0])


def _boundary(density: np.ndarray, t: float, budget: float) -> float:
    """The z whose crossing (|Z| >= z, the looks before not crossed) has probability `budget`."""
    total = _inside_mass(density, 10.0)
    if budget <= 0 or budget >= total:
        return math.inf if budget <= 0 else 0.0
    from scipy import optimize

    return float(optimize.brentq(lambda z: total - _inside_mass(density, z * math.sqrt(t)) - budget, 0.0, 12.0,
                                 xtol=1e-6))


def _advance(density: np.ndarray, dt: float) -> np.ndarray:
    """The density of B one step of information dt later: a convolution with N(0, dt)."""
    kernel = np.exp(-_SQUARED_GAPS / (2 * dt)) / math.sqrt(2 * math.pi * dt)
    return kernel @ density * _STEP


def boundaries(fractions: Sequence[float], alpha: float, kind: str = "pocock") -> Tuple[float, ...]:
    """The two-sided z boundary of each look at these increasing information fractions."""
    from scipy import stats

    out, before, previous = [], 0.0, 0.0
    density = np.zeros_like(_GRID)
    for t in fractions:
        density = stats.norm.pdf(_GRID, scale=math.sqrt(t)) if previous == 0 else _advance(density, t - previous)
        z = _boundary(density, t, spent(t, alpha, kind) - before)
        out.append(z)
        density = np.where(np.abs(_GRID) < z * math.sqrt(t), density, 0.0)
        before, previous = spent(t, alpha, kind), t
    return tuple(out)


@lru_cache(maxsize=256)
def nominal_levels(first: int, last: int, alpha: float, kind: str = "pocock") -> Tuple[float, ...]:
    """The nominal two-sided level of a test at each look n = first..last repeats, a look per
    round, information fraction n / last: what a look's p-value must be under to decide."""
    fractions = [n / last for n in range(first, last + 1)]
    from scipy import stats

    return tuple(float(2 * stats.norm.sf(z)) for z in boundaries(fractions, alpha, kind))


def level(n: int, first: int, last: int, alpha: float, kind: str = "pocock") -> float:
    """The nominal level of the look at n repeats (0 before the first look)."""
    if n < first:
        return 0.0
    return nominal_levels(first, last, alpha, kind)[min(n, last) - first]


# -- the first round ---------------------------------------------------------------------
MinP = Callable[[int, int], float]        # (repeats of a cell, of its baseline) -> the smallest p possible


def rank_min_p(n_cell: int, n_base: int) -> float:
    """Mann-Whitney's smallest two-sided p: 2 / C(n_cell + n_base, n_cell)."""
    return min(1.0, 2.0 / math.comb(n_cell + n_base, n_cell))


def t_min_p(n_cell: int, n_base: int) -> float:
    """A t-test's smallest p: 0 once the pair leaves a degree of freedom for its variance and
    the cell's own spread can be seen (two repeats), else 1 (no test)."""
    return 0.0 if n_cell >= 2 and n_cell + n_base - 2 >= 1 else 1.0


def first_round(comparisons: int, alpha: float, last: int, kind: str = "pocock",
                min_p: MinP = t_min_p, base_per_round: int = 2) -> int:
    """The fewest repeats per cell (the baseline `base_per_round` times as many) with which the
    first look can decide: the test's smallest p passes that look's nominal level for Holm's
    first step (alpha / comparisons). `last` when no round before it can."""
    for n in range(1, last + 1):       # a first look spends alpha(t) alone: its level is alpha(t)
        if min_p(n, base_per_round * n) < spent(n / last, alpha / max(comparisons, 1), kind):
            return n
    return last
