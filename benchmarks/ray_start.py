"""A local Ray's start, as the driver makes it, with and without `lean_local_start`.

    python benchmarks/ray_start.py                 # 5 rounds, about a minute on a 2-core machine
    python benchmarks/ray_start.py --runs 8

Each run is a fresh process that imports Ray, then times `ray.init` (the arguments the driver
passes for a local Ray) and its first task (a CPU task that returns at once), both from just
before `ray.init`; it then SIGKILLs the node's processes and removes its session folder, so Ray's
own shutdown is not timed. Modes, one of each per round in a random order, so that a change in
the machine's load falls on both alike:
- `ray`: Ray as it starts itself, with the driver's other settings (its API server, its agents,
  its log and autoscaler monitors; no worker before the first task);
- `lean`: inside `sweeper.executors.starter.lean_local_start`, as a sweep starts it.
The table gives the median and range of each, and the 1-minute load average before each round.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import PYTHON, bench_env, machine_line, markdown_table, median  # noqa: E402

MODES = ("ray", "lean")


def _pid() -> int:
    return os.getpid()


def child(mode: str) -> None:
    """One start: prints {"init": s, "task": s} and ends the node without Ray's shutdown."""
    import contextlib
    import logging
    import shutil

    import psutil
    import ray
    from ray._private import worker

    from sweeper.executors.starter import lean_local_start

    lean = lean_local_start() if mode == "lean" else contextlib.nullcontext(False)
    start = time.monotonic()
    with lean as prestart:
        ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
                 _system_config={"prestart_worker_first_driver": False, "enable_worker_prestart": prestart})
    init_s = time.monotonic() - start
    ray.get(ray.remote(num_cpus=1)(_pid).remote())
    print(json.dumps({"init": init_s, "task": time.monotonic() - start}), flush=True)
    session = worker._global_node.get_session_dir_path()
    below = psutil.Process().children(recursive=True)
    for proc in below:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(below, timeout=10)
    shutil.rmtree(session, ignore_errors=True)
    os._exit(0)


def one_run(mode: str) -> Dict[str, float]:
    proc = subprocess.run([PYTHON, __file__, "--child", mode], env=bench_env(), capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def rounds(runs: int) -> List[Dict[str, Dict[str, float]]]:
    done = []
    for index in range(runs):
        load = os.getloadavg()[0]
        order = random.sample(MODES, len(MODES))
        found = {mode: {**one_run(mode), "load": load} for mode in order}
        print(f"  round {index + 1} (load {load:.1f}): " + ", ".join(
            f"{m} {found[m]['init']:.2f} / {found[m]['task']:.2f} s" for m in order), flush=True)
        done.append(found)
    return done


def cell(values: Sequence[float]) -> str:
    return f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(done: List[Dict[str, Dict[str, float]]]) -> str:
    rows = [[mode, cell([r[mode]["init"] for r in done]), cell([r[mode]["task"] for r in done])] for mode in MODES]
    loads = [r[MODES[0]]["load"] for r in done]
    return "\n".join([f"Machine: {machine_line()}; 1-minute load average before each round: "
                      f"{min(loads):.1f}-{max(loads):.1f}", "",
                      markdown_table(["start", "ray.init, s (median, range)", "its first task done, s"], rows)])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds, one run of each mode per round (default 5)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    print(report(rounds(args.runs)))


if __name__ == "__main__":
    main()
