"""Two checkouts of sweeper, one-trial commands interleaved: did a change to the start or the end
of a command make it faster?

    git worktree add /tmp/before <commit>
    python benchmarks/ab_checkouts.py --before /tmp/before --after . --rounds 10 --kinds dry,local,error

Each round runs every (checkout, command) pair once, in a random order, each a whole
`python -m sweeper` from the checkout named by PYTHONPATH (run with the package installed
editable, as the README does; the checkout on PYTHONPATH comes first). The commands are the
one-trial sweep of benchmarks/startup.py on a CPU: `dry` (a dry run), `local` (executor=local),
`ray` (through a local Ray) and `error` (a config error, one line and exit 2). Prints the median
and range of each, with the machine and its load.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import PYTHON, load_average, median  # noqa: E402
from benchmarks.startup import OFF  # noqa: E402

ONE_TRIAL = ["workload.target=benchmarks.gpu_busy:run", "workload.steps=1", "workload.warmup_steps=0",
             "+workload.params.seconds=0.5", "resources.isolation=pack", "resources.gpus=0", "resources.cpus=1",
             "workload.device=cpu", *OFF]
KINDS = {"dry": [*ONE_TRIAL, "dry_run=true"], "local": [*ONE_TRIAL, "executor=local"], "ray": ONE_TRIAL,
         "error": ["workload.steps=-1"]}
EXPECTED = {"error": 2}          # exit codes other than 0


def one(checkout: Path, args: Sequence[str], results: Path) -> tuple:
    """Seconds of one whole command, and its exit code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run([PYTHON, "-m", "sweeper", f"results_dir={results}", *args], env=env, cwd=checkout,
                          capture_output=True, text=True)
    return time.perf_counter() - started, done.returncode


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout as it was")
    parser.add_argument("--after", type=Path, required=True, help="the checkout with the change")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--kinds", default="dry,local", help=f"comma-separated, of {', '.join(KINDS)}")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: {', '.join(unknown)} unknown; choose from {', '.join(KINDS)}")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: Dict[tuple, List[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ab-") as out:
        for _ in range(args.rounds):
            loads.append(load_average())
            pairs = [(tree, kind) for tree in trees for kind in kinds]
            random.shuffle(pairs)
            for tree, kind in pairs:
                seconds, code = one(trees[tree], KINDS[kind], Path(out))
                ok = code == EXPECTED.get(kind, 0)
                times.setdefault((kind, tree), []).append(seconds if ok else float("nan"))
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; {args.rounds} rounds; "
          f"1-minute load at each round: {', '.join(loads)}")
    for kind in kinds:
        for tree, path in trees.items():
            values = times[(kind, tree)]
            good = [v for v in values if v == v]
            span = f"{min(good):.2f}-{max(good):.2f}" if good else "-"
            print(f"{kind:6} {tree:6} median {median(values):.2f} s ({span}), failed {len(values) - len(good)}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
