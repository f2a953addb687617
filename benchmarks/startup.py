"""Start-up costs of sweeper: how long until the first trial runs, and what `--help` imports.

    python benchmarks/startup.py              # about 1.5 minutes on a 2-core machine
    python benchmarks/startup.py --runs 5     # more runs of each (medians shown)

Measures, each as a fresh command: `python -c pass` (the floor); `python -m sweeper --help`
(and, with -X importtime, whether it imported Ray, torch or W&B: it must not); a dry run of
24 and of 200 trials (Hydra composing every job, no Ray); `import ray` + a local
`ray.init()`; a zygote's start (a fresh Python importing torch and the rest of its preload
list, up to its ready line); and a one-trial sweep, split at the line sweeper prints once
Ray is up ("sweep '...': 1 trial(s) on ...") and at the trial's own started_at.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (PYTHON, READY_LINE, ROOT, bench_env, load_average,   # noqa: E402
                                machine_line, markdown_table, median, run_timed, span, sweeper_times)

# -- defaults -------------------------------------------------------------------------
RUNS = 3
DRY_RUN_SIZES = (24, 200)
HEAVY = ("ray", "torch", "wandb", "nvidia", "pandas", "pyarrow")   # must stay out of --help (first three)
FORBIDDEN = ("ray", "torch", "wandb")
TRIVIAL = ["workload.target=tests.workloads_for_tests:quick", "workload.steps=1", "workload.warmup_steps=0",
           "+workload.params.sleep_s=0", "resources.isolation=pack", "resources.cpus=1",
           "wandb.enabled=false", "report.enabled=false"]
RAY_INIT = ("import json, logging, time; t0 = time.perf_counter(); import ray; t1 = time.perf_counter(); "
            "ray.init(include_dashboard=False, logging_level=logging.WARNING); t2 = time.perf_counter(); "
            "ray.shutdown(); print(json.dumps({'import_s': t1 - t0, 'init_s': t2 - t1}))")


def wall(argv: Sequence[str], runs: int) -> float:
    return median([run_timed(argv).wall_s for _ in range(runs)])


def imported_modules(argv: Sequence[str]) -> Dict[str, float]:
    """Top-level packages a command imported, with their cumulative import time in seconds."""
    proc = subprocess.run([PYTHON, "-X", "importtime", *argv], cwd=ROOT, env=bench_env(),
                          capture_output=True, text=True, timeout=300)
    return import_times(proc.stderr)


def import_times(importtime_output: str) -> Dict[str, float]:
    """`python -X importtime` lines -> {top-level package: its largest cumulative time, s}."""
    out: Dict[str, float] = {}
    for line in importtime_output.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:"):].split("|"))
        if cumulative.isdigit():
            top = name.split(".")[0]
            out[top] = max(out.get(top, 0.0), int(cumulative) / 1e6)
    return out


def heavy_imports(argv: Sequence[str]) -> Dict[str, float]:
    found = imported_modules(argv)
    return {name: found[name] for name in HEAVY if name in found}


def describe(heavy: Dict[str, float]) -> str:
    listed = ", ".join(f"{name} ({seconds:.2f} s)" for name, seconds in heavy.items())
    return "imports " + (listed or "none of " + "/".join(HEAVY))


def dry_run(n: int, runs: int, out: Path) -> float:
    grid = ",".join(str(i) for i in range(n))
    return wall([PYTHON, "-m", "sweeper", f"results_dir={out}", *TRIVIAL, f"workload.seed={grid}", "dry_run=true"],
                runs)


def ray_init(runs: int) -> Dict[str, float]:
    results = []
    for _ in range(runs):
        proc = subprocess.run([PYTHON, "-c", RAY_INIT], cwd=ROOT, env=bench_env(), capture_output=True,
                              text=True, timeout=300)
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {key: median([r[key] for r in results]) for key in ("import_s", "init_s")}


def zygote_start(runs: int) -> float:
    """A fresh `python -m sweeper._zygote <socket>` until it says it is ready (its preload done)."""
    times = []
    for _ in range(runs):
        folder = tempfile.mkdtemp(prefix="sweeper-bench-z-")
        start = time.monotonic()
        proc = subprocess.Popen([PYTHON, "-m", "sweeper._zygote", os.path.join(folder, "z.sock")], cwd=ROOT,
                                env=bench_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        proc.stdout.readline()                 # {"ready": pid}
        times.append(time.monotonic() - start)
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    return median(times)


def one_trial_sweep(runs: int, out: Path) -> Dict[str, float]:
    """Command start -> Ray up (the "sweep ..." line) -> first trial's started_at -> exit."""
    parts: Dict[str, List[float]] = {"to_ready_s": [], "ready_to_trial_s": [], "to_trial_s": [], "wall_s": []}
    for i in range(runs):
        results = out / f"one-trial-{i}"
        run = run_timed([PYTHON, "-m", "sweeper", f"results_dir={results}", *TRIVIAL], log=results / "command.log")
        first, _ = span(sweeper_times(results))
        ready = run.first_line_at(READY_LINE) or float("nan")
        parts["to_ready_s"].append(ready - run.started_at)
        parts["ready_to_trial_s"].append(first - ready)
        parts["to_trial_s"].append(first - run.started_at)
        parts["wall_s"].append(run.wall_s)
    return {key: median(values) for key, values in parts.items()}


def measure(runs: int, out: Path) -> Tuple[List[list], Dict[str, float]]:
    """The table's rows, and the heavy packages `--help` imported."""
    help_cmd = ["-m", "sweeper", "--help"]
    help_heavy = heavy_imports(help_cmd)
    dry_cmd = ["-m", "sweeper", f"results_dir={out / 'dry'}", *TRIVIAL, "workload.seed=0,1", "dry_run=true"]
    rows = [["`python -c pass` (the floor)", wall([PYTHON, "-c", "pass"], runs), ""],
            ["`python -m sweeper --help`", wall([PYTHON, *help_cmd], runs), describe(help_heavy)]]
    rows += [[f"dry run of {n} trials (Hydra composes each job; no Ray)",
              dry_run(n, runs if n <= 24 else 1, out / "dry"), "" if n <= 24 else "one run"] for n in DRY_RUN_SIZES]
    rows[-1][2] = "; ".join(filter(None, [rows[-1][2], describe(heavy_imports(dry_cmd))]))
    ray = ray_init(runs)
    rows += [["`import ray`", ray["import_s"], ""], ["local `ray.init()`", ray["init_s"], ""],
             ["zygote start: fresh Python, torch and its preload list imported", zygote_start(runs),
              "once per sweep on a local Ray (the driver starts it while Ray starts); once per Ray worker elsewhere"]]
    one = one_trial_sweep(runs, out)
    rows += [["1-trial sweep: command -> Ray up (\"sweep ...\" line)", one["to_ready_s"], "Hydra, compose, ray.init"],
             ["1-trial sweep: Ray up -> trial started_at", one["ready_to_trial_s"], "worker start, connect to the warm zygote, fork"],
             ["1-trial sweep: command -> trial started_at", one["to_trial_s"], ""],
             ["1-trial sweep: whole command", one["wall_s"], "incl. ray.shutdown and the table"]]
    return rows, help_heavy


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs of each command (default {RUNS})")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for logs and startup.md (default results/benchmarks/startup-<time>)")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    out = (args.out or ROOT / "results" / "benchmarks" / time.strftime("startup-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"startup: {machine_line()}\n  logs under {out}", flush=True)
    load_before = load_average()
    rows, help_heavy = measure(args.runs, out)
    text = "\n\n".join([f"Machine: {machine_line()}; load average {load_before} before, {load_average()} after",
                        f"Command: `python benchmarks/startup.py {' '.join(sys.argv[1:] if argv is None else argv)}`"
                        f" (median of {args.runs} runs each)",
                        markdown_table(["start-up step", "s", "note"], rows)]) + "\n"
    (out / "startup.md").write_text(text)
    print("\n" + text)
    forbidden = [name for name in FORBIDDEN if name in help_heavy]
    if forbidden:
        raise SystemExit(f"`python -m sweeper --help` imported {forbidden}: it must stay light")


if __name__ == "__main__":
    main()
