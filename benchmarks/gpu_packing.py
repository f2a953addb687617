"""GPU packing: N one-GPU trials of known length L on G GPUs, through sweeper and through
a plain Ray script, against the ideal makespan N x L / G.

    python benchmarks/gpu_packing.py                        # L=3 s and L=30 s, N=4, every GPU (~4 min on 2 H200)
    python benchmarks/gpu_packing.py --lengths 30 --trials 8
    python benchmarks/gpu_packing.py --device cpu --lengths 1 --trials 4   # smoke run without a GPU

Each trial runs benchmarks/gpu_busy.py: CUDA start and a first matmul (timed), then bf16
matmuls for L seconds. sweeper runs them with `resources.isolation=gpu resources.gpus=1`
(kept Ray workers, a warm zygote, one forked child per trial that starts CUDA itself).
The plain Ray script is what one would write by hand: `@ray.remote(num_gpus=1)` tasks with
Ray's defaults, so each task gets a fresh worker process that imports torch and starts CUDA.

Makespan is measured from the moment Ray is up and the trials are about to be submitted
(sweeper prints "sweep '...': N trial(s) on ..."; the Ray script notes the time) to the last
trial's end, so Ray's own start is left out of both; the whole command's wall time is shown
too. Efficiency = ideal / makespan. Also shown: the median gap on a GPU between one trial's
end and the next one's start, and the median set-up inside a trial (trial start to the
first timed matmul step: fork or process start, imports, CUDA start, cuBLAS).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (PYTHON, READY_LINE, ROOT, machine_line, markdown_table, median,   # noqa: E402
                                read_times, run_timed, span, sweeper_times, write_times)
from sweeper.cudastart import visible_gpus  # noqa: E402

# -- defaults -------------------------------------------------------------------------
LENGTHS = (3.0, 30.0)    # seconds of compute per trial
TRIALS = 4               # per length; the reference: four 3-s trials on two H200 took 11.9 s in plain Ray
TARGET = 0.90            # packing efficiency wanted for 30-s trials


# -- the two runners ------------------------------------------------------------------
def sweeper_command(out: Path, trials: int, seconds: float, device: str) -> List[str]:
    grid = ",".join(str(i) for i in range(trials))
    where = (["resources.isolation=gpu", "resources.gpus=1"] if device == "cuda" else
             ["resources.isolation=pack", "resources.gpus=0", "resources.cpus=1", "workload.device=cpu"])
    return [PYTHON, "-m", "sweeper", f"results_dir={out / 'results'}", "workload.target=benchmarks.gpu_busy:run",
            "workload.steps=1", "workload.warmup_steps=0", f"+workload.params.seconds={seconds:g}",
            f"workload.seed={grid}", "wandb.enabled=false", "report.enabled=false", *where]


def plain_ray_command(out: Path, trials: int, seconds: float, device: str) -> List[str]:
    return [PYTHON, "benchmarks/gpu_packing.py", "--plain-ray-child", "--trials", str(trials),
            "--lengths", f"{seconds:g}", "--device", device, "--out", str(out)]


def plain_ray_task(seconds: float, device: str, times_dir: str) -> None:
    """One trial as a hand-written Ray task: its process imports torch and starts CUDA."""
    started = time.time()
    from benchmarks.baselines import workload_config
    from benchmarks.gpu_busy import run
    from sweeper.probe import Probe

    cfg = workload_config(0, 0.0)
    cfg.workload.device, cfg.workload.params = device, {"seconds": seconds}
    probe = Probe()
    figures = {**run(cfg, probe), **probe.figures, "gpu": _gpu_id(device)}
    write_times(Path(times_dir), started, time.time(), figures=figures)


def _gpu_id(device: str) -> str:
    if device != "cuda":
        return f"cpu-{os.getpid()}"
    import torch

    return str(getattr(torch.cuda.get_device_properties(0), "uuid", os.environ.get("CUDA_VISIBLE_DEVICES")))


def plain_ray_child(trials: int, seconds: float, device: str, out: Path) -> None:
    import ray

    ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ready.json").write_text(json.dumps({"ready_at": time.time()}))
    # Ray's defaults: a GPU task gets a fresh worker (max_calls=1); on a CPU, ask for the same.
    options = {"num_gpus": 1} if device == "cuda" else {"num_cpus": 1, "max_calls": 1}
    task = ray.remote(**options)(plain_ray_task)
    ray.get([task.remote(seconds, device, str(out / "times")) for _ in range(trials)])
    ray.shutdown()


# -- one measured run -----------------------------------------------------------------
def gpu_of(trial: dict) -> str:
    figures, fp = trial.get("figures") or {}, trial.get("fingerprint") or {}
    return str(figures.get("gpu") or fp.get("gpu_uuid") or trial.get("worker_pid"))


def gaps_and_setup(times: List[dict]) -> tuple:
    """Median gap between consecutive trials on one GPU, and median in-trial set-up."""
    by_gpu: Dict[str, List[dict]] = defaultdict(list)
    for t in times:
        by_gpu[gpu_of(t)].append(t)
    gaps = []
    for trials in by_gpu.values():
        trials.sort(key=lambda t: t["started_at"])
        gaps += [b["started_at"] - a["ended_at"] for a, b in zip(trials, trials[1:])]
    setup = [t["figures"]["compute_started_at"] - t["started_at"] for t in times
             if "compute_started_at" in (t.get("figures") or {})]
    return median(gaps), median(setup)


def measure(name: str, command, trials: int, seconds: float, slots: int, device: str, out: Path) -> dict:
    folder = out / f"{name}-L{seconds:g}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    run = run_timed(command(folder, trials, seconds, device), log=folder / "command.log")
    times = sweeper_times(folder / "results") if name == "sweeper" else read_times(folder / "times")
    ready = (run.first_line_at(READY_LINE) if name == "sweeper" else
             json.loads((folder / "ready.json").read_text())["ready_at"] if (folder / "ready.json").exists() else None)
    first, last = span(times)
    ideal = trials * seconds / slots
    makespan = last - (ready if ready else float("nan"))
    gap, setup = gaps_and_setup(times)
    row = {"runner": name, "L_s": seconds, "trials": len(times), "wanted": trials, "slots": slots,
           "returncode": run.returncode, "wall_s": run.wall_s, "makespan_s": makespan, "ideal_s": ideal,
           "efficiency": ideal / makespan, "span_s": last - first, "span_efficiency": ideal / (last - first),
           "gap_s": gap, "setup_s": setup}
    print(f"  {name:<9} L={seconds:g} s  wall {run.wall_s:6.1f} s  makespan {makespan:6.1f} s  ideal {ideal:5.1f} s"
          f"  {len(times)}/{trials} trials  rc={run.returncode}", flush=True)
    if run.returncode != 0 or len(times) != trials:
        print(run.tail(20), file=sys.stderr)
    return row


HEADERS = ["runner", "L s", "trials", "slots", "wall s", "makespan s", "ideal s", "efficiency", "span s",
           "span eff.", "gap between trials s", "set-up in trial s"]


def table(rows: Sequence[dict]) -> str:
    label = {"sweeper": "sweeper (warm zygote, fork per trial)", "plain-ray": "plain Ray tasks (fresh process each)"}
    cells = [[label[r["runner"]] + ("" if r["returncode"] == 0 and r["trials"] == r["wanted"] else " FAILED"),
              f"{r['L_s']:g}", r["trials"], r["slots"], r["wall_s"], r["makespan_s"], r["ideal_s"],
              f"{r['efficiency']:.0%}", r["span_s"], f"{r['span_efficiency']:.0%}", r["gap_s"], r["setup_s"]]
             for r in rows]
    return markdown_table(HEADERS, cells)


# -- main -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default=",".join(f"{x:g}" for x in LENGTHS), help="trial lengths L in seconds")
    parser.add_argument("--trials", type=int, default=TRIALS, help=f"trials per length (default {TRIALS})")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke run without a GPU")
    parser.add_argument("--runners", default="sweeper,plain-ray", help="comma-separated, of sweeper,plain-ray")
    parser.add_argument("--out", type=Path, default=None, help="folder for gpu_packing.md, .json and logs.txt "
                        "(three files; default results/benchmarks/gpu-<time>)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs' result folders "
                        "(default: a temporary one)")
    parser.add_argument("--plain-ray-child", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    lengths = [float(x) for x in args.lengths.split(",") if x]
    out = (args.out or ROOT / "results" / "benchmarks" / time.strftime("gpu-%Y%m%d-%H%M%S")).resolve()
    if args.plain_ray_child:
        return plain_ray_child(args.trials, lengths[0], args.device, out)
    slots = visible_gpus() if args.device == "cuda" else (os.cpu_count() or 1)
    if slots == 0:
        raise SystemExit("no GPU on this host; use --device cpu for a smoke run")
    work = (args.work or Path(tempfile.mkdtemp(prefix="gpu-packing-"))).resolve()
    print(f"gpu_packing: {machine_line()}, {slots} {'GPU' if args.device == 'cuda' else 'CPU'} slot(s)\n"
          f"  runs under {work}", flush=True)
    commands = {"sweeper": sweeper_command, "plain-ray": plain_ray_command}
    rows = [measure(name, commands[name], args.trials, length, slots, args.device, work)
            for length in lengths for name in args.runners.split(",")]
    command = "python benchmarks/gpu_packing.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = "\n\n".join([f"Machine: {machine_line()}, {slots} slot(s) ({args.device})", f"Command: `{command}`",
                        table(rows), f"Target: efficiency >= {TARGET:.0%} for 30-s trials."]) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_packing.md").write_text(text)
    (out / "gpu_packing.json").write_text(json.dumps(rows, indent=2))
    logs = sorted(work.glob("*/command.log"))
    (out / "logs.txt").write_text("".join(f"== {p.parent.name}\n{p.read_text()}\n" for p in logs))
    print("\n" + text)


if __name__ == "__main__":
    main()
