"""How repeats=auto compares with fixed repeats, on simulated sweeps whose answers are known.

Each simulated sweep is a baseline and five cells; each repeat's throughput is log-normal
with the sweep's per-repeat noise (CV drawn log-uniformly from 1% to 10%). Half the sweeps
are A/A (every cell the baseline's twin), half carry effects of 0, 3, 5, 10 and 30%, each
slower or faster at random. Every rule judges the same draws, with the decision functions
the sweep and the analysis use:

  repeats=5, repeats=10   sweeper.analysis.verdicts.compare_with_baseline (Mann-Whitney, Holm)
  adaptive (removed)      BenchmarkDotNet's precision rule that adaptive.* applied: 3 repeats
                          (the baseline 6), one more while the 95% interval of the mean is wider
                          than 2% of it, at most 10; then the same verdicts
  auto, auto + race       sweeper.analysis.sequential.replay (repeats=auto; the race is
                          analysis.objective=fastest), each cell stopped where the sweep stops it

It prints, with 95% intervals: the A/A false-alarm rate (sweeps with any cell called faster or
slower), the power at +10% (the 10% cell called the right way), the mean trials per sweep,
and how often the fastest setting named (sequential.fastest) is truly the fastest or within
analysis.min_effect of it.

    python benchmarks/sequential_sim.py                       # 2,000 sweeps, 2 processes: ~2 min on 2 cores
    python benchmarks/sequential_sim.py --sweeps 200 --jobs 1
    python benchmarks/sequential_sim.py --slow 0.08            # 8% of repeats slowed by a busy machine
    python benchmarks/sequential_sim.py --baseline 0.8         # the baseline's later repeats: 0.8 x Dunnett's
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweeper.analysis import sequential as seq  # noqa: E402
from sweeper.analysis.stats import FASTER, SLOWER  # noqa: E402
from sweeper.analysis.verdicts import compare_with_baseline  # noqa: E402
from sweeper.schema import AnalysisConfig, SequentialConfig  # noqa: E402

EFFECTS = (0.0, 0.03, 0.05, 0.10, 0.30)
CV_RANGE = (0.01, 0.10)
RULES = ("repeats=5", "repeats=10", "adaptive (removed)", "auto", "auto + race")
BASE = "base"
SLOWED_BY = (0.10, 0.40)             # --slow: how much a busy machine takes off a repeat
MAX_DRAWS = 20                       # values drawn per cell: enough for every rule


@dataclass(frozen=True)
class Sweep:
    cv: float
    effects: Tuple[float, ...]        # signed: +0.10 = 10% slower, -0.10 = 10% faster
    values: Dict[str, np.ndarray]     # cell -> its repeats' throughput, in run order

    @property
    def cells(self) -> List[str]:
        return [f"c{i}" for i in range(len(self.effects))]

    def speed(self, cell: str) -> float:
        """True throughput relative to the baseline."""
        return 1.0 if cell == BASE else 1.0 / (1.0 + self.effects[int(cell[1:])]) if self.effects[int(cell[1:])] >= 0 \
            else 1.0 - self.effects[int(cell[1:])]


def slowed(rng: np.random.Generator, values: np.ndarray, share: float) -> np.ndarray:
    """The values with `share` of them (at random) slowed by 10-40%, as a busy machine slows a repeat."""
    hit = rng.random(values.size) < share
    return values * np.where(hit, 1 - rng.uniform(*SLOWED_BY, values.size), 1.0)


def draw(rng: np.random.Generator, aa: bool, slow_share: float = 0.0) -> Sweep:
    cv = float(math.exp(rng.uniform(*np.log(CV_RANGE))))
    signs = rng.choice([-1.0, 1.0], len(EFFECTS))
    effects = tuple(0.0 for _ in EFFECTS) if aa else tuple(float(s * e) for s, e in zip(signs, EFFECTS))
    sweep = Sweep(cv, effects, {})
    values = {BASE: np.exp(rng.normal(0.0, cv, 2 * MAX_DRAWS))}
    for cell in sweep.cells:
        values[cell] = np.exp(rng.normal(math.log(sweep.speed(cell)), cv, MAX_DRAWS))
    if slow_share > 0:
        values = {c: slowed(rng, v, slow_share) for c, v in values.items()}
    return Sweep(cv, effects, values)


def baseline_rule(name: str):
    """A replacement for sequential.baseline_target after the first round, for --baseline: `held`
    (the first round's repeats), `plus1` (one more a round), `twice` (twice a cell's), or a number
    (that many times Dunnett's sqrt(open cells) x a cell's). The design families docs/analysis.md lists."""
    dunnett = seq.baseline_target

    def target(round_: int, open_cells: int, design: seq.Design, have: int) -> int:
        if round_ <= design.first:
            return dunnett(round_, open_cells, design, have)
        wanted = {"held": 2 * design.first, "plus1": 2 * design.first + round_ - design.first,
                  "twice": 2 * round_}.get(name)
        if wanted is None:
            wanted = math.ceil(float(name) * math.sqrt(max(open_cells, 1)) * round_)
        return max(have, wanted)
    return target


# -- the rules ----------------------------------------------------------------------------------
Outcome = Tuple[Dict[str, str], int, Dict[str, np.ndarray]]     # verdicts, trials, the values each cell used


def fixed(sweep: Sweep, counts: Dict[str, int], cfg: AnalysisConfig) -> Outcome:
    """The analysis' verdicts over the first `counts[cell]` repeats of each cell."""
    used = {c: sweep.values[c][:n] for c, n in counts.items()}
    frame = pd.DataFrame([(c, v) for c, vs in used.items() for v in vs], columns=["cell_id", "items_per_s"])
    found = compare_with_baseline(frame, [BASE, *sweep.cells], BASE, cfg, "throughput", n_resamples=20)
    return {c: x.verdict for c, x in found.items()}, sum(counts.values()), used


def repeats(sweep: Sweep, n: int, cfg: AnalysisConfig) -> Outcome:
    return fixed(sweep, {BASE: 2 * n, **{c: n for c in sweep.cells}}, cfg)


def mean_rel_halfwidth(x: np.ndarray, confidence: float = 0.95) -> float:
    """The removed rule's figure: the Student-t interval's half-width of the mean, over the mean."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size) / abs(x.mean()))


def adaptive(sweep: Sweep, cfg: AnalysisConfig) -> Outcome:
    """The removed rule: each cell alone, until its mean is known to within 2% (or 10 repeats)."""
    counts = {}
    for cell, start in [(BASE, 6), *((c, 3) for c in sweep.cells)]:
        n = start
        while n < 10 and not mean_rel_halfwidth(sweep.values[cell][:n], 0.95) <= 0.02:
            n += 1
        counts[cell] = n
    return fixed(sweep, counts, cfg)


def auto(sweep: Sweep, design: seq.Design) -> Outcome:
    """repeats=auto: every look the sweep takes, on the values it would have had."""
    values = {c: dict(enumerate(v)) for c, v in sweep.values.items()}
    rounds = {c: design.max_repeats for c in sweep.cells}
    replayed = seq.replay(values, rounds, BASE, design)
    decided = seq.closed(replayed.decisions)
    used = {BASE: sweep.values[BASE][:replayed.base_used]}
    used.update({c: sweep.values[c][:max(d.n, design.first)] for c, d in decided.items()})
    verdicts = {c: d.verdict if d.reason != seq.DROPPED else seq.DROPPED for c, d in decided.items()}
    return verdicts, sum(len(v) for v in used.values()), used


def named_fastest(sweep: Sweep, outcome: Outcome, design: seq.Design) -> str:
    verdicts, _, used = outcome
    decisions = {c: seq.Decision(c, reason=seq.DROPPED) for c, v in verdicts.items() if v == seq.DROPPED}
    found = seq.fastest({c: dict(enumerate(v)) for c, v in used.items()}, BASE, decisions, design)
    return found.cell_id if found else BASE


# -- one sweep, every rule ----------------------------------------------------------------------
def judge(sweep: Sweep, design: seq.Design, cfg: AnalysisConfig) -> Dict[str, tuple]:
    """rule -> (any false alarm, the 10% cell right, trials, the named fastest truly fastest or tied)."""
    race = seq.Design(**{**design.__dict__, "race": True})
    outcomes = {"repeats=5": repeats(sweep, 5, cfg), "repeats=10": repeats(sweep, 10, cfg),
                "adaptive (removed)": adaptive(sweep, cfg), "auto": auto(sweep, design),
                "auto + race": auto(sweep, race)}
    best = max([BASE, *sweep.cells], key=sweep.speed)
    ten = next(c for c, e in zip(sweep.cells, sweep.effects) if abs(e) == 0.10) if any(sweep.effects) else None
    out = {}
    for rule, outcome in outcomes.items():
        verdicts = outcome[0]
        alarm = any(v in (FASTER, SLOWER) for c, v in verdicts.items() if sweep.speed(c) == 1.0)
        right = None if ten is None else verdicts[ten] == (SLOWER if sweep.speed(ten) < 1 else FASTER)
        named = named_fastest(sweep, outcome, race if rule == "auto + race" else design)
        tied = sweep.speed(best) / sweep.speed(named) <= 1 + design.min_effect
        out[rule] = (alarm, right, outcome[1], named == best or tied)
    return out


def chunk(args) -> List[Tuple[bool, Dict[str, tuple]]]:
    seed, count, design, slow_share = args
    rng, cfg = np.random.default_rng(seed), AnalysisConfig()
    rows = []
    for i in range(count):
        aa = i % 2 == 0
        rows.append((aa, judge(draw(rng, aa, slow_share), design, cfg)))
    return rows


# -- the table ----------------------------------------------------------------------------------
def wilson(hits: int, n: int) -> Tuple[float, float, float]:
    if n == 0:
        return math.nan, math.nan, math.nan
    p, z = hits / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(centre - half, 0.0), min(centre + half, 1.0)


def rate(values: Sequence[bool]) -> str:
    p, low, high = wilson(sum(values), len(values))
    return f"{p * 100:.1f}% [{low * 100:.1f}, {high * 100:.1f}]"


def mean(values: Sequence[float]) -> str:
    x = np.asarray(values, dtype=float)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    return f"{x.mean():.1f} [{x.mean() - half:.1f}, {x.mean() + half:.1f}]"


def table(rows: List[Tuple[bool, Dict[str, tuple]]]) -> str:
    lines = ["| rule | A/A false alarms | power at +10% | mean trials per sweep | fastest named: truly fastest or tied |",
             "|---|---|---|---|---|"]
    for rule in RULES:
        aa = [r[rule][0] for is_aa, r in rows if is_aa]
        power = [r[rule][1] for is_aa, r in rows if not is_aa]
        trials = [r[rule][2] for _, r in rows]
        picked = [r[rule][3] for is_aa, r in rows if not is_aa]
        lines.append(f"| {rule} | {rate(aa)} | {rate(power)} | {mean(trials)} | {rate(picked)} |")
    return "\n".join(lines)


def simulate(sweeps: int, jobs: int, seed: int, design: seq.Design,
             slow_share: float = 0.0) -> List[Tuple[bool, Dict[str, tuple]]]:
    parts = [(seed + i, sweeps // jobs + (i < sweeps % jobs), design, slow_share) for i in range(jobs)]
    if jobs == 1:
        return [row for part in parts for row in chunk(part)]
    with ProcessPoolExecutor(jobs) as pool:
        return [row for rows in pool.map(chunk, parts) for row in rows]


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000, help="simulated sweeps, half A/A (default 2000)")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow", type=float, default=0.0,
                        help="share of repeats a busy machine slows by 10-40%% (default 0)")
    defaults = SequentialConfig()
    parser.add_argument("--max-repeats", type=int, default=defaults.max_repeats, help="sequential.max_repeats")
    parser.add_argument("--futility", type=float, default=defaults.futility, help="sequential.futility")
    parser.add_argument("--spending", default=defaults.spending, help="sequential.spending")
    parser.add_argument("--baseline", default="dunnett",
                        help="the baseline's repeats after the first round: dunnett (the rule), held, plus1, twice, "
                             "or a factor on Dunnett's (0.8)")
    args = parser.parse_args(list(argv))
    if args.baseline != "dunnett":
        seq.baseline_target = baseline_rule(args.baseline)    # forked workers inherit it
    cfg = AnalysisConfig()
    bounds = SequentialConfig(max_repeats=args.max_repeats, futility=args.futility, spending=args.spending)
    bounds.check()
    design = seq.design_for(cfg, bounds, len(EFFECTS))
    started = time.monotonic()
    rows = simulate(args.sweeps, args.jobs, args.seed, design, args.slow)
    text = (f"{args.sweeps} simulated sweeps (half A/A), a baseline and {len(EFFECTS)} cells each, effects "
            f"{', '.join(f'{e:.0%}' for e in EFFECTS)} either way, per-repeat CV {CV_RANGE[0]:.0%}-{CV_RANGE[1]:.0%} "
            f"(log-uniform){f', {args.slow:.0%} of repeats slowed by 10-40%' if args.slow else ''}; alpha {cfg.alpha}, min_effect {cfg.min_effect}; repeats=auto: first round "
            f"{design.first}, max {design.max_repeats}, {design.spending} spending, futility {design.futility}, "
            f"baseline {args.baseline}\n\n"
            f"{table(rows)}\n\n({time.monotonic() - started:.0f} s, {args.jobs} process(es))")
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
