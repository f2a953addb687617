"""Start-up on any host: each step as a whole command, a few runs of each, the median.

    python benchmarks/startup.py                      # about 4 minutes on a 2-core machine
    python benchmarks/startup.py --runs 5 --trials 8 --trial-s 3

Rows, each the wall time of a fresh command run from the project root:
- the floor: `python -c "import torch; torch.zeros(1, device=D)"`, D = cuda where there is a GPU;
- bare Ray: `python -c "import ray; ray.init()"` (its exit still ends Ray), and with `ray.shutdown()`;
- `python -m sweeper --help` (with -X importtime: what it imported), and a dry run;
- a one-trial sweep with `executor=local` and through Ray (the default); the trial is
  benchmarks/gpu_busy.py keeping the device busy for --one-s seconds (0.5);
- N trials of --trial-s seconds, packed: span efficiency = N x L / (slots x span), the span
  from the first trial's start to the last one's end (trial.json), slots = GPUs (or CPUs).

Every command runs with SWEEPER_TIMELINE set (sweeper/timeline.py): a second table gives, for
the sweeps, the median second at which each phase was reached, and for the packed sweep where
each trial's span goes (set-up before the workload, the workload's own CUDA start and first
matmul, its L seconds, the probe's end and the record, the way back to the driver and out again).

Commands run in rounds, one of each per round, so that a change in the machine's load falls on
every row alike. W&B, report and history are off. Nothing is fetched: no network is needed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (PYTHON, ROOT, bench_env, load_average, machine_line, markdown_table,  # noqa: E402
                                median, run_timed, span, sweeper_times)
from sweeper import timeline  # noqa: E402

# -- defaults ---------------------------------------------------------------------------
RUNS = 3              # runs of each command; the table shows medians
ONE_S = 0.5           # the one-trial sweeps' trial: seconds of device work
TRIALS = 8            # the packed sweep: how many trials ...
TRIAL_S = 3.0         # ... of how many seconds each
PACKED_WARMUP = 10    # the packed trials' warm-up steps (the schema's default), inside their seconds
nan = float("nan")
HEAVY = ("ray", "torch", "wandb", "scipy", "nvidia", "pandas", "pyarrow")   # none of these in --help
FORBIDDEN = ("ray", "torch")                                                 # nor in a dry run
OFF = ["wandb.enabled=false", "report.enabled=false", "history.enabled=false"]


def floor_code(device: str) -> str:
    return f"import torch; torch.zeros(1, device={device!r})"


def device_of_host() -> str:
    from sweeper.cudastart import visible_gpus     # /dev/nvidia*: no torch, no CUDA here

    return "cuda" if visible_gpus() else "cpu"


def slots(device: str) -> int:
    from sweeper.cudastart import visible_gpus

    return visible_gpus() if device == "cuda" else (os.cpu_count() or 1)


def trial_args(device: str, seconds: float, warmup_steps: int = 0) -> List[str]:
    """One-device trials of benchmarks/gpu_busy.py: a GPU each, or a CPU each."""
    where = (["resources.isolation=gpu", "resources.gpus=1"] if device == "cuda" else
             ["resources.isolation=pack", "resources.gpus=0", "resources.cpus=1", "workload.device=cpu"])
    return ["workload.target=benchmarks.gpu_busy:run", "workload.steps=1", f"workload.warmup_steps={warmup_steps}",
            f"+workload.params.seconds={seconds:g}", *where, *OFF]


def sweeper(out: Path, *args: str) -> List[str]:
    return [PYTHON, "-m", "sweeper", f"results_dir={out}", *args]


def commands(device: str, one_s: float, trials: int, trial_s: float) -> Dict[str, Callable[[Path], List[str]]]:
    """Row -> its command, given a fresh folder for its results."""
    one = trial_args(device, one_s)
    grid = ",".join(str(i) for i in range(trials))
    return {
        "floor": lambda out: [PYTHON, "-c", floor_code(device)],
        "ray_init": lambda out: [PYTHON, "-c", "import ray; ray.init()"],
        "ray_init_shutdown": lambda out: [PYTHON, "-c", "import ray; ray.init(); ray.shutdown()"],
        "help": lambda out: [PYTHON, "-m", "sweeper", "--help"],
        "dry_run": lambda out: sweeper(out, *one, "dry_run=true"),
        "local": lambda out: sweeper(out, *one, "executor=local"),
        "ray": lambda out: sweeper(out, *one),
        "packed": lambda out: sweeper(out, *trial_args(device, trial_s, PACKED_WARMUP), f"workload.seed={grid}"),
        "packed_cold": lambda out: sweeper(out, *trial_args(device, trial_s, PACKED_WARMUP), f"workload.seed={grid}",
                                           "resources.prestart=false"),
    }


LABELS = {
    "floor": "floor: `python -c \"{floor}\"`",
    "ray_init": "`python -c \"import ray; ray.init()\"` (Ray ends as Python exits)",
    "ray_init_shutdown": "`python -c \"import ray; ray.init(); ray.shutdown()\"`",
    "help": "`python -m sweeper --help`",
    "dry_run": "`python -m sweeper ... dry_run=true` (compose and plan, no Ray)",
    "local": "one-trial sweep, `executor=local`",
    "ray": "**one-trial sweep through Ray (the default)**",
    "packed": "{trials} trials of {trial_s:g} s packed, whole command",
    "packed_cold": "the same, each trial's process made when it starts (`resources.prestart=false`)",
}


# -- measuring --------------------------------------------------------------------------
def run_round(cmds: Dict[str, Callable[[Path], List[str]]], out: Path, index: int) -> Dict[str, dict]:
    """Each command once: its wall time, and for sweeps the trials' start and end times."""
    found: Dict[str, dict] = {"load": {"wall_s": float(load_average().replace("-", "nan"))}}
    for name, make in cmds.items():
        folder = out / name / str(index)
        folder.mkdir(parents=True, exist_ok=True)
        marks = folder / "timeline.txt"
        run = run_timed(make(folder), env=bench_env({timeline.VARIABLE: str(marks)}), log=folder / "command.log")
        if run.returncode != 0:
            print(f"  {name}: exit {run.returncode}\n{run.tail(20)}", file=sys.stderr)
        found[name] = {"wall_s": run.wall_s if run.returncode == 0 else float("nan"),
                       "times": sweeper_times(folder) if folder.is_dir() else [],
                       "marks": marks_since(marks, run.started_at)}
        print(f"  round {index + 1}: {name:<18} {found[name]['wall_s']:6.2f} s", flush=True)
    return found


def packing(times: List[dict], trials: int, trial_s: float, slot_count: int) -> Dict[str, float]:
    """Span efficiency N x L / (slots x span) and the span per trial and slot."""
    first, last = span(times)
    wide = last - first
    waits = [t["figures"]["prestart_wait_s"] for t in times if "prestart_wait_s" in t.get("figures", {})]
    if len(times) != trials or not wide == wide or wide <= 0:
        return {"span_s": float("nan"), "efficiency": float("nan"), "per_trial_s": float("nan"),
                "prestart_wait_s": float("nan")}
    used = min(slot_count, trials)
    return {"span_s": wide, "efficiency": trials * trial_s / (used * wide), "per_trial_s": wide * used / trials,
            "prestart_wait_s": max(waits) if waits else float("nan")}


def imports_of(args: Sequence[str]) -> Dict[str, float]:
    """Heavy top-level packages `python -m sweeper ARGS` imported, with their cumulative seconds."""
    import subprocess

    proc = subprocess.run([PYTHON, "-X", "importtime", "-m", "sweeper", *args], cwd=ROOT, env=bench_env(),
                          capture_output=True, text=True, timeout=300)
    found = import_times(proc.stderr)
    return {name: found[name] for name in HEAVY if name in found}


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


def describe(heavy: Dict[str, float]) -> str:
    listed = ", ".join(f"{name} ({seconds:.2f} s)" for name, seconds in heavy.items())
    return "imports " + (listed or "none of " + "/".join(HEAVY))


# -- the table --------------------------------------------------------------------------
def rows_of(rounds: List[Dict[str, dict]], args, device: str, slot_count: int,
            heavy: Dict[str, Dict[str, float]]) -> List[list]:
    names = [n for n in rounds[0] if n != "load"]
    walls = {name: median([r[name]["wall_s"] for r in rounds]) for name in names}
    notes = {name: packed_note([packing(r[name]["times"], args.trials, args.trial_s, slot_count) for r in rounds],
                               args.trial_s, slot_count, args.trials)
             for name in names if name.startswith("packed")}
    notes.update({name: _against(walls, name, "floor") for name in names if name.startswith("local")})
    notes.update({name: f"{_against(walls, name, 'ray_init', 'bare `ray.init()`')}, {_against(walls, name, 'floor')}"
                  for name in names if name.startswith("ray") and not name.startswith("ray_init")})
    notes.update({"help": describe(heavy["help"]), "dry_run": describe(heavy["dry_run"])})
    fill = {"floor": floor_code(device), "trials": args.trials, "trial_s": args.trial_s}
    return [[LABELS[n].format(**fill), walls[n], _range([r[n]["wall_s"] for r in rounds]), notes.get(n, "")]
            for n in names]


def _against(walls: Dict[str, float], name: str, other: str, label: str = "the floor") -> str:
    if other not in walls:       # left out with --only
        return ""
    return f"{walls[name] - walls[other]:+.2f} s against {label}"


def packed_note(packs: List[Dict[str, float]], trial_s: float, slot_count: int, trials: int) -> str:
    waits = [p["prestart_wait_s"] for p in packs if p["prestart_wait_s"] == p["prestart_wait_s"]]
    waited = f"; a trial's first measured step waited {max(waits):.3f} s at most for the GPU's quiet" if waits else ""
    return (f"span efficiency {median([p['efficiency'] for p in packs]):.1%} on {min(slot_count, trials)} "
            f"slot(s): {median([p['per_trial_s'] for p in packs]):.2f} s a trial for {trial_s:g} s of work{waited}")


# -- where the seconds go (SWEEPER_TIMELINE) ---------------------------------------------
PHASES = ("main", "zygote_started", "cuda_ready", "first_job_composed", "jobs_composed", "ray_imported", "imports_warm",
          "zygote_ready", "ray_ready", "executor_started", "trial_start", "trial_set_up", "fingerprinted", "workload_start",
          "workload_end", "trial_end", "outcome", "trials_done", "executor_closed", "published")


def marks_since(path: Path, started_at: float) -> List[tuple]:
    """The timeline a command wrote to `path`: (seconds after its start, pid, phase)."""
    return [(t - started_at, pid, what) for t, pid, what in timeline.read(str(path))]


def first_marks(marks: List[tuple]) -> Dict[str, float]:
    """Each phase -> the seconds after the command's start at which it was first reached."""
    out: Dict[str, float] = {}
    for offset, _, name in marks:
        out.setdefault(name, offset)
    return out


def phase_rows(rounds: List[Dict[str, dict]], names: Sequence[str]) -> List[list]:
    """One row per phase: its median second in each one-trial sweep, and the command's end."""
    firsts = {n: [first_marks(r[n]["marks"]) for r in rounds] for n in names}
    rows = [[phase] + [median([f.get(phase, float("nan")) for f in firsts[n]]) for n in names] for phase in PHASES]
    rows = [row for row in rows if any(v == v for v in row[1:])]
    return rows + [["the command's end"] + [median([r[n]["wall_s"] for r in rounds]) for n in names]]


def trial_spans(marks: List[tuple], times: List[dict]) -> Dict[str, List[float]]:
    """Per trial of a packed sweep: where its span goes, in seconds (trials in start order)."""
    by_pid: Dict[int, Dict[str, float]] = {}
    for offset, pid, name in marks:
        by_pid.setdefault(pid, {})[name] = offset
    trials = sorted((m for m in by_pid.values() if "trial_start" in m and "trial_end" in m),
                    key=lambda m: m["trial_start"])
    outcomes = sorted(offset for offset, _, name in marks if name == "outcome")
    figures = [t["figures"] for t in sorted(times, key=lambda t: t["started_at"])]
    out: Dict[str, List[float]] = {k: [] for k in SPAN_PARTS}
    for i, m in enumerate(trials):
        fig = figures[i] if i < len(figures) else {}
        out["before the workload (fork, fingerprint, probe)"].append(m.get("workload_start", nan) - m["trial_start"])
        out["workload: CUDA start"].append(fig.get("cuda_init_s", nan))
        out["workload: operands and first matmul"].append(
            m.get("workload_end", nan) - m.get("workload_start", nan) - fig.get("cuda_init_s", nan)
            - fig.get("busy_s", fig.get("measured_s", nan)))
        out["after the workload (probe's end, record)"].append(m["trial_end"] - m.get("workload_end", nan))
        later = [o for o in outcomes if o >= m["trial_end"]]
        out["record back to the driver"].append(later[0] - m["trial_end"] if later else nan)
        following = [t["trial_start"] for t in trials if later and t["trial_start"] >= later[0]]
        if following:
            out["driver to the next trial's start"].append(min(following) - later[0])
    return out


SPAN_PARTS = ("before the workload (fork, fingerprint, probe)", "workload: CUDA start",
              "workload: operands and first matmul", "after the workload (probe's end, record)",
              "record back to the driver", "driver to the next trial's start")


def span_rows(rounds: List[Dict[str, dict]], names: Sequence[str]) -> List[list]:
    parts = {n: [trial_spans(r[n]["marks"], r[n]["times"]) for r in rounds] for n in names}
    return [[part] + [median([v for p in parts[n] for v in p[part]]) for n in names] for part in SPAN_PARTS]


def _range(values: Sequence[float]) -> str:
    values = [v for v in values if v == v]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def report(rows: List[list], rounds: List[Dict[str, dict]], args, device: str) -> str:
    loads = ", ".join(f"{r['load']['wall_s']:.1f}" for r in rounds)
    head = f"Machine: {machine_line()}; device {device}; 1-minute load average at each round: {loads}"
    command = f"Command: `python benchmarks/startup.py {' '.join(args.argv)}` (median of {args.runs} runs each)"
    sweeps = [n for n in rounds[0] if n.startswith(("local", "ray")) and not n.startswith("ray_init")]
    packed = [n for n in rounds[0] if n.startswith("packed")]
    phases = ("Where the seconds of a one-trial sweep go: the median second, after the command's start, at "
              "which each phase was first reached (SWEEPER_TIMELINE)\n\n"
              + markdown_table(["phase", *sweeps], phase_rows(rounds, sweeps)))
    spans = ("Where a packed trial's span goes beyond its work, in seconds (median over its trials and runs)\n\n"
             + markdown_table(["part", *packed], span_rows(rounds, packed)))
    return "\n\n".join([head, command, markdown_table(["what", "s (median)", "runs", "note"], rows),
                         phases, spans]) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"rounds of every command (default {RUNS})")
    parser.add_argument("--one-s", type=float, default=ONE_S, help=f"seconds of work of the one trial ({ONE_S:g})")
    parser.add_argument("--trials", type=int, default=TRIALS, help=f"trials of the packed sweep ({TRIALS})")
    parser.add_argument("--trial-s", type=float, default=TRIAL_S, help=f"seconds of each packed trial ({TRIAL_S:g})")
    parser.add_argument("--only", default=None, help="a comma list of rows to run (default all): "
                        + ", ".join(LABELS))
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda where there is a GPU")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for logs and startup.md (default results/benchmarks/startup-<time>)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    device = args.device or device_of_host()
    out = (args.out or ROOT / "results" / "benchmarks" / time.strftime("startup-%Y%m%d-%H%M%S")).resolve()
    if out.is_dir() and any(out.iterdir()):    # its timelines and results would be read with this run's
        raise SystemExit(f"error: --out {out} is not empty: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    print(f"startup: {machine_line()}, device {device}\n  logs under {out}", flush=True)
    cmds = commands(device, args.one_s, args.trials, args.trial_s)
    heavy = {"help": imports_of(["--help"]), "dry_run": imports_of(cmds["dry_run"](out / "imports")[3:])}
    if args.only:
        cmds = {name: cmds[name] for name in args.only.split(",")}
    rounds = [run_round(cmds, out, i) for i in range(args.runs)]
    text = report(rows_of(rounds, args, device, slots(device), heavy), rounds, args, device)
    (out / "startup.md").write_text(text)
    print("\n" + text)
    light = {k: sorted(set(FORBIDDEN) & set(v)) for k, v in heavy.items() if set(FORBIDDEN) & set(v)}
    if light:
        raise SystemExit(f"imported where it must not: {light}")


if __name__ == "__main__":
    main()
