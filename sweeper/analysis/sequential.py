"""Sequential decisions (`repeats=auto`): each cell against its baseline after every round.

A round gives every open cell one more repeat and its baseline what Dunnett's allocation asks.
After each round every open cell is looked at, and a look decides it: faster or slower
(significant at the look's nominal level and past analysis.min_effect), within the minimum
effect (its repeated interval inside +-min_effect, or significant but smaller), no detectable
change (predictive power to end significant and past min_effect below `futility`), or still
open. A cell is closed once decided, at its maximum, when its last repeat failed (or every one
of its baseline's so far), or when the sweep's budget ends.
docs/analysis.md#repeats-auto gives the method and its assumptions:

- the test (contrasts.py): Student's t on the log of each repeat's value (one value per repeat,
  the unit of evidence), its variance pooled over the stratum's cells; a cell significantly
  noisier than the rest is judged with the pair's own (Welch's) variances;
- repeated looks: Lan-DeMets alpha spending per comparison (boundaries.py), information
  fraction = round / max_repeats; multiplicity: Holm at every look over the stratum's
  comparisons not yet rejected (Maurer and Bretz's sequentially rejective procedure); the
  "within" interval (an equivalence claim) spends its own 2 alpha, Pocock-type;
- futility is non-binding: the boundaries come from the spending alone, so a stop skipped cannot
  take the false-alarm rate above alpha (it only forgoes rejections);
- slow repeats (slow.py, the rule the analysis' note names them by; `Evidence`): on the log scale
  one repeat slowed by a busy machine inflates the pooled variance until every cell stops as "no
  detectable change". A cell of four or more leaves its slow repeats out and is then judged with
  its own variance; a smaller cell with a slow-looking value is left out of the stratum's noise,
  judged with its own, and not stopped for futility until it can be told apart.

`replay` is the one rule: the sweep calls it after every round to choose what runs next,
and the analysis calls it on the finished run for the verdicts, so both say the same.
Pure: plain dicts and numbers, no frames, no files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from sweeper.analysis import boundaries, slow
from sweeper.analysis.contrasts import Contrast, contrast, logs, pooled
from sweeper.schema import AnalysisConfig, SequentialConfig
from sweeper.analysis.stats import FASTER, NO_CHANGE, SLOWER, cliffs_delta, within

UNDECIDED = "undecided"
OPEN = ""                                  # reason of a cell that may still get repeats
DECIDED, DROPPED, AT_MAX, BUDGET = "decided", "dropped from the race", "at its maximum", "budget"
FAILED_REPEAT = "a repeat failed"        # an open cell whose last repeat failed gets no more (its row says why)
BASELINE_FAILED = "the baseline failed"  # every repeat of the baseline so far failed: nothing to judge against
Values = Mapping[int, float]               # repeat number -> the repeat's value (NaN: failed)
WITHIN_SPENDING = "pocock"                 # the "within" interval's own spending (an equivalence claim, TOST)


@dataclass(frozen=True)
class Design:
    """What a sequential comparison is judged with (from analysis.* and sequential.*; the
    defaults are theirs, read from the schema, the one home of each)."""
    alpha: float = AnalysisConfig.alpha
    min_effect: float = AnalysisConfig.min_effect
    max_repeats: int = SequentialConfig.max_repeats
    first: int = 2                        # repeats per cell of the first round (first_round computes it)
    spending: str = SequentialConfig.spending
    futility: float = SequentialConfig.futility
    higher_is_better: bool = True
    race: bool = False                    # analysis.objective=fastest: drop cells clearly worse than the leader


@dataclass(frozen=True)
class Decision:
    """A cell against its baseline at its last look: ratio = cell / baseline (geometric means)
    with its repeated confidence interval, the look's p and the level it was held to."""
    cell_id: str
    verdict: str = UNDECIDED
    reason: str = OPEN
    n: int = 0
    n_base: int = 0
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    level: float = math.nan
    rejected: bool = False                # significant at its look: counts as a Holm rejection
    left_out: int = 0                     # the cell's slow repeats its last look left out (slow.py)
    base_left_out: int = 0                # the baseline's, at that look
    delta: float = math.nan               # Cliff's delta, baseline against cell, over the repeats that look judged

    @property
    def is_open(self) -> bool:
        return self.reason == OPEN


# -- one look -----------------------------------------------------------------------------
def _level(design: Design, round_: int, alpha: float) -> float:
    return boundaries.level(round_, design.first, design.max_repeats, alpha, design.spending)


def _direction(ratio: float, design: Design) -> str:
    return FASTER if (ratio > 1) == design.higher_is_better else SLOWER


def _futile(c: Contrast, round_: int, design: Design, final_level: float) -> bool:
    """Whether the cell can no longer be called faster or slower by its maximum: its predictive
    power (the chance to end significant *and* past min_effect, what those verdicts need, averaged
    over what its data say the effect may be: Spiegelhalter, Freedman and Blackburn 1986, on the
    B-value of Lan and Wittes) is below design.futility. Significance alone kept a cell with a
    small, clear change running on for a "within" (docs/analysis.md#repeats-auto: 1.1 trials of
    18.5 a simulated sweep, for the same power)."""
    t = round_ / design.max_repeats
    if t >= 1 or not (c.se > 0):
        return False
    from scipy import stats as sps

    final_se = c.se * math.sqrt(t)                 # the standard error at the maximum, by information
    edge = max(sps.norm.isf(final_level / 2), math.log1p(design.min_effect) / final_se)   # in final z units
    mean, spread = c.d / c.se / math.sqrt(t), math.sqrt((1 - t) / t)
    power = sps.norm.sf((edge - mean) / spread) + sps.norm.cdf((-edge - mean) / spread)
    return power < design.futility


def _judge(cell: str, c: Contrast, significant: bool, level: float, round_: int, design: Design,
           width_level: float, final_level: float) -> Decision:
    """The decision of one open cell at a look, given whether Holm let it be significant."""
    low, high = c.interval(width_level)
    ratio = math.exp(c.d) if math.isfinite(c.d) else math.nan
    base = Decision(cell, UNDECIDED, OPEN, ratio=ratio, low=low, high=high, p=c.p(), level=level)
    edge = 1 + design.min_effect
    if significant and max(ratio, 1 / ratio) >= edge:
        return replace(base, verdict=_direction(ratio, design), reason=DECIDED, rejected=True)
    if (1 / edge < low and high < edge) or significant:          # no bigger change, or a real but small one
        return replace(base, verdict=within(design.min_effect), reason=DECIDED, rejected=significant)
    if round_ >= design.max_repeats:
        return replace(base, verdict=NO_CHANGE, reason=AT_MAX)
    if _futile(c, round_, design, final_level):
        return replace(base, verdict=NO_CHANGE, reason=DECIDED)
    return base


@dataclass(frozen=True)
class Evidence:
    """A look's log values: as run (`ran`), and as judged (`kept`: slow repeats left out,
    slow.leave_out); `unsure`: cells of two with a slow-looking value, whose noise is not known yet."""
    ran: Mapping[str, np.ndarray]
    kept: Dict[str, np.ndarray]
    unsure: FrozenSet[str]

    @classmethod
    def of(cls, ran: Mapping[str, np.ndarray], higher_is_better: bool) -> "Evidence":
        return cls(ran, *slow.leave_out(ran, higher_is_better))

    @cached_property
    def noise(self) -> Tuple[float, int]:
        """The stratum's pooled variance, without the cells whose noise is not known yet (once a look)."""
        return pooled([x for c, x in self.kept.items() if c not in self.unsure])

    def own_noise(self, cell: str, ref: str) -> bool:
        """Whether the pair is judged with its own variances: a side lost a slow repeat (a merely
        noisy one would be flattered by the pooled variance) or its noise is not known yet."""
        return any(c in self.unsure or self.kept[c].size < self.ran[c].size for c in (cell, ref))

    def left_out(self, cell: str) -> int:
        return int(self.ran[cell].size - self.kept[cell].size)

    def contrast(self, cell: str, ref: str) -> Contrast:
        return contrast(self.kept[cell], self.kept[ref], self.noise, self.own_noise(cell, ref))


def look(seen: Evidence, baseline: str, open_cells: Sequence[str], design: Design,
         round_: int, comparisons: int, rejected: int) -> Dict[str, Decision]:
    """Decisions of the open cells at round `round_` from the stratum's values so far (`seen`):
    Holm step-down over the p-values, each against the nominal level of its alpha share; no
    futility stop for a pair whose noise is not known yet."""
    found = {c: seen.contrast(c, baseline) for c in open_cells}
    order = sorted(open_cells, key=lambda c: (not math.isfinite(found[c].p()), found[c].p(), c))
    left = max(comparisons - rejected, 1)
    width = boundaries.level(round_, design.first, design.max_repeats, min(2 * design.alpha, 0.5), WITHIN_SPENDING)
    final = boundaries.level(design.max_repeats, design.first, design.max_repeats, design.alpha / left,
                             design.spending)
    out, stepping = {}, True
    for j, cell in enumerate(order):
        lvl = _level(design, round_, design.alpha / max(left - j, 1))
        stepping = stepping and found[cell].p() < lvl
        unsure = {cell, baseline} & seen.unsure
        out[cell] = _judge(cell, found[cell], stepping, lvl, round_, replace(design, futility=0.0) if unsure else design,
                           width, final)
        out[cell] = replace(out[cell], n=int(seen.ran[cell].size), n_base=int(seen.ran[baseline].size),
                            left_out=seen.left_out(cell), base_left_out=seen.left_out(baseline),
                            delta=cliffs_delta(seen.kept[baseline], seen.kept[cell]))
    return out


# -- the race (analysis.objective=fastest) ------------------------------------------------
def leader(data: Mapping[str, np.ndarray], candidates: Sequence[str], design: Design) -> Optional[str]:
    """The cell with the best mean of logs among `candidates` that have values."""
    sign = 1.0 if design.higher_is_better else -1.0
    scored = [(sign * float(data[c].mean()), c) for c in candidates if data[c].size]
    return max(scored)[1] if scored else None


def clearly_worse(seen: Evidence, cell: str, best: str, design: Design, round_: int, comparisons: int) -> bool:
    """Whether `cell` is significantly worse than the leader `best` at this look (F-Race's
    elimination, held to the same spending and Bonferroni share as the verdicts)."""
    c = seen.contrast(cell, best)
    worse = (c.d < 0) == design.higher_is_better
    return worse and c.p() < _level(design, round_, design.alpha / max(comparisons, 1))


def _race(seen: Evidence, decisions: Dict[str, Decision], design: Design, round_: int, comparisons: int) -> None:
    """Drops the open cells clearly worse than the current leader (in place)."""
    kept = [c for c in seen.kept if decisions.get(c) is None or decisions[c].reason != DROPPED]
    best = leader(seen.kept, kept, design)
    for cell, d in list(decisions.items()):
        if d.is_open and best is not None and cell != best and clearly_worse(seen, cell, best, design, round_,
                                                                                comparisons):
            decisions[cell] = replace(d, reason=DROPPED)


# -- every look of a run -------------------------------------------------------------------
def _upto(values: Values, count: int) -> np.ndarray:
    return logs([v for r, v in values.items() if r < count])


def rounds_of(repeats: Sequence[int]) -> int:
    """The rounds a cell took part in, from its trials' repeat numbers (any status): round r
    holds its repeat r-1. (The baseline's repeats per round follow `baseline_target`.)"""
    return max(repeats) + 1 if repeats else 0


def baseline_target(round_: int, open_cells: int, design: Design, have: int) -> int:
    """The baseline's repeats wanted by round `round_`: twice a cell's in the first round,
    then sqrt(open cells) times a cell's (Dunnett's allocation for many-to-one comparisons),
    never fewer than it has."""
    if round_ <= design.first:
        return 2 * design.first
    return max(have, math.ceil(math.sqrt(max(open_cells, 1)) * round_))


@dataclass(frozen=True)
class Replayed:
    decisions: Dict[str, Decision]
    base_used: int                        # the baseline's repeats at the last look
    base_wanted: int                      # the baseline's repeats wanted by the next round
    base_at: Dict[int, int]               # round -> the baseline's repeats at that round's look


def replay(values: Mapping[str, Values], rounds: Mapping[str, int], baseline: str,
           design: Design, base_at: Optional[Mapping[int, int]] = None) -> Replayed:
    """Every look of one stratum, in order, as the sweep took them: at round r, each open cell's
    repeats before r, each closed cell's before the round that closed it (the sweep ran no more),
    and the baseline's first `baseline_target` ones, or `base_at[r]`: the baseline's repeats at
    that look as the sweep ran them (another metric's replay of the same run passes the chosen
    metric's, whose looks set the baseline's schedule). A cell decided at a look keeps that
    decision; OPEN ones may get another round; a look with no value of the baseline (each of its
    repeats failed) closes every open cell: BASELINE_FAILED."""
    cells = [c for c in values if c != baseline]
    out: Dict[str, Decision] = {c: Decision(c) for c in cells}
    rejected, comparisons, base = 0, len(cells), baseline_target(design.first, len(cells), design, 0)
    used, upto, at = base, {c: design.first for c in cells}, {}
    for r in range(design.first, max([rounds.get(c, 0) for c in cells] + [0]) + 1):
        base = base_at.get(r, base) if base_at is not None else base
        upto.update({c: r for c in cells if out[c].is_open})
        data = {c: _upto(values[c], base if c == baseline else upto[c]) for c in values}
        open_now = [c for c in cells if out[c].is_open and rounds.get(c, 0) >= r]
        if not open_now:
            break
        used = at[r] = base
        if not data[baseline].size:              # no more rounds against a baseline that fails each time
            out.update({c: replace(out[c], reason=BASELINE_FAILED, n=int(data[c].size)) for c in open_now})
            break
        seen = Evidence.of(data, design.higher_is_better)
        out.update(look(seen, baseline, open_now, design, r, comparisons, rejected))
        rejected = sum(1 for d in out.values() if d.rejected)
        if design.race:
            _race(seen, out, design, r, comparisons)
        base = baseline_target(r + 1, sum(1 for d in out.values() if d.is_open), design, base)
    return Replayed(out, used, base, at)


def wanting(decisions: Mapping[str, Decision], rounds: Mapping[str, int], design: Design) -> List[str]:
    """The cells that get another round: open, in the last round, below their maximum."""
    done = max(rounds.values(), default=0)
    return [c for c, d in decisions.items()
            if d.is_open and rounds.get(c, 0) == done and done < design.max_repeats]


def last_failed(values: Values, repeats: Sequence[int]) -> bool:
    """Whether the cell's last repeat (its trials' highest repeat number) left no value: it failed."""
    return bool(repeats) and not math.isfinite(values.get(max(repeats), math.nan))


def closed(decisions: Mapping[str, Decision], failed: Sequence[str] = ()) -> Dict[str, Decision]:
    """The decisions of a finished run: a cell still open when the run ended stopped because its
    last repeat failed (`failed`), else at the budget."""
    return {c: (replace(d, reason=FAILED_REPEAT if c in failed else BUDGET) if d.is_open else d)
            for c, d in decisions.items()}


# -- the recommendation of a race ------------------------------------------------------------
@dataclass(frozen=True)
class Fastest:
    """The fastest setting and those tied with it (not clearly worse, or within min_effect)."""
    cell_id: str
    tied: Tuple[str, ...]
    ratio: float                            # against the baseline, with its interval
    low: float
    high: float


def fastest(values: Mapping[str, Values], baseline: str, decisions: Mapping[str, Decision],
            design: Design) -> Optional[Fastest]:
    """The leader among the cells not dropped from the race, its ties, its ratio to the baseline."""
    seen = Evidence.of({c: logs(list(v.values())) for c, v in values.items()}, design.higher_is_better)
    data = seen.kept
    kept = [c for c in data if c not in decisions or decisions[c].reason != DROPPED]
    best = leader(data, kept, design)
    if best is None:
        return None
    width = design.alpha / max(len(data) - 1, 1)
    tied = []
    for cell in kept:
        c = seen.contrast(cell, best)
        low, high = c.interval(width)
        near = 1 / (1 + design.min_effect) < low and high < 1 + design.min_effect
        if cell != best and data[cell].size and (near or not c.p() < width):
            tied.append(cell)
    low, high = seen.contrast(best, baseline).interval(width)
    ratio = math.exp(float(data[best].mean() - data[baseline].mean())) if data[baseline].size else math.nan
    return Fastest(best, tuple(tied), ratio, low, high)


def design_for(analysis, sequential, comparisons: int) -> Design:
    """The Design of a run from its AnalysisConfig and SequentialConfig; `comparisons`: the
    largest number of cells judged against one baseline (the first round is computed for it)."""
    from sweeper.analysis.model import HIGHER_IS_BETTER

    first = sequential.first_round or boundaries.first_round(comparisons, analysis.alpha, sequential.max_repeats,
                                                             sequential.spending)
    return Design(analysis.alpha, analysis.min_effect, sequential.max_repeats, first, sequential.spending,
                  sequential.futility, analysis.metric in HIGHER_IS_BETTER, analysis.objective == "fastest")


def trials_left(replayed: Replayed, rounds: Mapping[str, int], base_have: int, design: Design) -> int:
    """The most trials the stratum may still take: each open cell to its maximum, the
    baseline to its target for the last round (what the progress bar's ETA counts)."""
    open_cells = [c for c, d in replayed.decisions.items() if d.is_open]
    cells = sum(max(design.max_repeats - rounds.get(c, 0), 0) for c in open_cells)
    base = baseline_target(design.max_repeats, len(open_cells), design, base_have) - base_have if open_cells else 0
    return cells + max(base, 0)
