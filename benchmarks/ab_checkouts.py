"""Two checkouts of sweeper, one-trial commands interleaved: did a change to the start or the end
of a command make it faster?

    git worktree add /tmp/before <commit>
    python benchmarks/ab_checkouts.py --before /tmp/before --after . --rounds 10 --kinds dry,local,error

Each round runs every (checkout, command) pair once, in a random order, each a whole
`python -m sweeper` from the checkout named by PYTHONPATH (run with the package installed
editable, as the README does; the checkout on PYTHONPATH comes first). The commands are the
one-trial sweep of benchmarks/startup.py on a CPU: `dry` (a dry run), `local` (executor=local),
`ray` (through a local Ray) and `error` (a config error, one line and exit 2); `--device cuda`
runs the trial on a GPU (benchmarks/startup.py's one-trial sweep, the same arguments). Prints the
median and range of each, with the machine and its load, and for the sweeps the median second at
which a few phases were reached (SWEEPER_TIMELINE, sweeper/timeline.py).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import PYTHON, load_average, median, run_timed  # noqa: E402
from benchmarks.startup import first_marks, marks_since, trial_args  # noqa: E402
from sweeper import timeline  # noqa: E402

KINDS = ("dry", "local", "ray", "error")
EXPECTED = {"error": 2}          # exit codes other than 0
PHASES = ("main", "executor_started", "ray_ready", "trial_start", "workload_start", "outcome", "trials_done")     # the sweeps' milestones, printed


def kind_args(kind: str, device: str) -> List[str]:
    one_trial = trial_args(device, 0.5)
    return {"dry": [*one_trial, "dry_run=true"], "local": [*one_trial, "executor=local"], "ray": one_trial,
            "error": ["workload.steps=-1"]}[kind]


def one(checkout: Path, args: Sequence[str], results: Path) -> tuple:
    """Seconds of one whole command, its exit code, and the second each phase was first reached."""
    marks = results / "timeline"
    marks.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]),
           timeline.VARIABLE: str(marks)}
    run = run_timed([PYTHON, "-m", "sweeper", f"results_dir={results}", *args], env=env, cwd=checkout)
    return run.wall_s, run.returncode, first_marks(marks_since(marks, run.started_at))


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout as it was")
    parser.add_argument("--after", type=Path, required=True, help="the checkout with the change")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--kinds", default="dry,local", help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the one trial runs")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: {', '.join(unknown)} unknown; choose from {', '.join(KINDS)}")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: Dict[tuple, List[float]] = {}
    phases: Dict[tuple, List[dict]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ab-") as out:
        for _ in range(args.rounds):
            loads.append(load_average())
            pairs = [(tree, kind) for tree in trees for kind in kinds]
            random.shuffle(pairs)
            for tree, kind in pairs:
                seconds, code, reached = one(trees[tree], kind_args(kind, args.device), Path(out))
                ok = code == EXPECTED.get(kind, 0)
                times.setdefault((kind, tree), []).append(seconds if ok else float("nan"))
                phases.setdefault((kind, tree), []).append(reached)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; {args.rounds} rounds; "
          f"1-minute load at each round: {', '.join(loads)}")
    for kind in kinds:
        for tree, path in trees.items():
            values = times[(kind, tree)]
            good = [v for v in values if v == v]
            span = f"{min(good):.2f}-{max(good):.2f}" if good else "-"
            print(f"{kind:6} {tree:6} median {median(values):.2f} s ({span}), failed {len(values) - len(good)}  {path}")
            reached = [f"{p} {median([r.get(p, float('nan')) for r in phases[(kind, tree)]]):.2f}" for p in PHASES
                       if any(p in r for r in phases[(kind, tree)])]
            if reached:
                print(f"{'':13} median second reached: {', '.join(reached)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
