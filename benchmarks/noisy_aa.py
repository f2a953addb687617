"""A/A false alarms of repeats=auto when one side is noisier than the rest: what leaving slow
repeats out of the looks (sweeper/analysis/slow.py) costs a cell or baseline that is noisy by
itself, whose low values are no busy machine's.

Each simulated sweep is a baseline and five cells, all the same speed, log-normal repeats at 2%
noise except the one side named; the sweep's looks are sequential.replay's. `--keep-slow` judges
the same draws with every repeat kept (the rule before slow repeats were left out).

    python benchmarks/noisy_aa.py                 # 600 sweeps a case, seed 11: about 8 s here
    python benchmarks/noisy_aa.py --keep-slow
    python benchmarks/noisy_aa.py --max-repeats 6 --futility 0.55     # another design's bounds
    python benchmarks/noisy_aa.py --fixed 5                           # the same draws judged as repeats=5
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweeper.analysis import sequential as seq, slow  # noqa: E402
from sweeper.analysis.stats import FASTER, SLOWER  # noqa: E402
from sweeper.schema import AnalysisConfig, SequentialConfig  # noqa: E402

QUIET = 0.02
CELLS = 5                          # beside the baseline: four quiet, the fifth at the case's noise
CASES = {"one cell at 10%": (QUIET, 0.10), "one cell at 15%": (QUIET, 0.15), "one cell at 20%": (QUIET, 0.20),
         "the baseline at 10%": (0.10, QUIET), "the baseline at 15%": (0.15, QUIET)}


def alarms(base_cv: float, odd_cv: float, sweeps: int, seed: int, design: seq.Design, fixed: int = 0) -> float:
    """Share of A/A sweeps with any cell called faster or slower; the fifth cell at odd_cv.
    `fixed`: the same draws judged as `repeats=fixed` judges them (its first repeats of each cell,
    the baseline's twice as many; the rank test and Holm), instead of repeats=auto's looks."""
    rng, hits, most = np.random.default_rng(seed), 0, design.max_repeats
    cvs = [QUIET] * (CELLS - 1) + [odd_cv]
    for _ in range(sweeps):
        values = {"base": dict(enumerate(np.exp(rng.normal(0.0, base_cv, 24))))}
        values.update({f"c{i}": dict(enumerate(np.exp(rng.normal(0.0, cv, 7)))) for i, cv in enumerate(cvs)})
        verdicts = _fixed(values, fixed) if fixed else \
            [d.verdict for d in seq.replay(values, {c: most for c in values if c != "base"}, "base", design)
             .decisions.values()]
        hits += any(v in (FASTER, SLOWER) for v in verdicts)
    return hits / sweeps


def _fixed(values, n: int):
    """The verdicts of repeats=n over these values (benchmarks/sequential_sim.py's fixed rule)."""
    from benchmarks.sequential_sim import Sweep, repeats

    arrays = {c: np.array(list(v.values())) for c, v in values.items()}
    return list(repeats(Sweep(QUIET, (0.0,) * CELLS, arrays), n, AnalysisConfig())[0].values())


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep-slow", action="store_true", help="keep every repeat (the rule before)")
    defaults = SequentialConfig()
    parser.add_argument("--max-repeats", type=int, default=defaults.max_repeats, help="sequential.max_repeats")
    parser.add_argument("--futility", type=float, default=defaults.futility, help="sequential.futility")
    parser.add_argument("--fixed", type=int, default=0, metavar="R",
                        help="judge the same draws as repeats=R (2-7) judges them, for comparison; the bounds "
                             "above and --keep-slow are repeats=auto's and do not apply (default: repeats=auto)")
    args = parser.parse_args(list(argv))
    if args.fixed and not 2 <= args.fixed <= 7:
        parser.error(f"--fixed {args.fixed}: repeats=R from 2 to 7 (each cell has 7 draws; one repeat gives no verdicts)")
    bounds = SequentialConfig(max_repeats=args.max_repeats, futility=args.futility)
    bounds.check()
    design = seq.design_for(AnalysisConfig(), bounds, CELLS)
    if args.keep_slow:
        slow.leave_out = lambda logs, higher_is_better=True: (dict(logs), frozenset())
    rule = (f"repeats={args.fixed} (the rank test, Holm)" if args.fixed else
            f"{'every repeat kept' if args.keep_slow else 'slow repeats left out'}; repeats=auto: first round "
            f"{design.first}, max {design.max_repeats}, futility {design.futility}")
    print(f"{args.sweeps} A/A sweeps a case, seed {args.seed}, {rule}\n")
    print("| noisier side | A/A false alarms |\n|---|---|")
    for name, (base_cv, odd_cv) in CASES.items():
        print(f"| {name} | {alarms(base_cv, odd_cv, args.sweeps, args.seed, design, args.fixed):.1%} |")


if __name__ == "__main__":
    main(sys.argv[1:])
