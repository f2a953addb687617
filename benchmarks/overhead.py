"""Per-trial overhead of sweeper, next to Hydra's BasicLauncher and Ray Tune, in one run.

    python benchmarks/overhead.py                          # N=24, trivial and 1-s trials, every runner
    python benchmarks/overhead.py --trials 8 --runners sweeper-pack,tune --workloads trivial
    python benchmarks/overhead.py --dry-run                # print the commands, run nothing

Every runner runs the same N trials of `tests.workloads_for_tests:quick` (one step, no
warm-up, sleeping `sleep_s`), each as one whole command in a subprocess. From each run:
the command's wall time; the time from the command's start to the first trial's start;
and the span from the first trial's start to the last one's end (trial.json's
started_at/ended_at, or the same times written by the baselines), which leaves Ray's and
Python's start-up out. The ideal span is N x sleep_s / slots.

Then, in this process and without Ray, where a trial's time goes: one trivial trial
through a warm zygote (fork, run, collect), and what the driver writes after each trial
(the trial folder, and summary.parquet rewritten over all trials so far) at N=24 and 200.

On a 2-core machine the default run takes about 6 minutes; Ray Tune is half of it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (PYTHON, READY_LINE, ROOT, CommandRun, load_average,   # noqa: E402
                                machine, machine_line,
                                markdown_table, median, read_times, run_timed, span, sweeper_times)

# -- defaults -------------------------------------------------------------------------
TRIALS = 24
SLEEP_S = 1.0                       # the "fixed length" workload; "trivial" sleeps 0
SUMMARY_SIZES = (24, 200)           # trial counts at which the summary rewrite is measured
WORKLOAD = "tests.workloads_for_tests:quick"
SWEEPER_COMMON = [f"workload.target={WORKLOAD}", "workload.steps=1", "workload.warmup_steps=0", "resources.cpus=1"]
NO_SINKS = ["wandb.enabled=false", "report.enabled=false"]   # W&B and report.html: measured apart
CPUS = os.cpu_count() or 1


# -- runners --------------------------------------------------------------------------
@dataclass(frozen=True)
class Runner:
    name: str
    label: str
    slots: int                      # trials that can run at once on this machine
    isolated: bool                  # each trial in a fresh process of its own
    command: Callable[[Path, int, float], List[str]]
    sweeper: bool                   # results in trial.json (else the baseline writes times/)


def _grid(n: int) -> str:
    return ",".join(str(i) for i in range(n))


def _sweeper(*extra: str) -> Callable[[Path, int, float], List[str]]:
    def command(out: Path, n: int, sleep_s: float) -> List[str]:
        return [PYTHON, "-m", "sweeper", f"results_dir={out / 'results'}", *SWEEPER_COMMON,
                f"+workload.params.sleep_s={sleep_s:g}", f"workload.seed={_grid(n)}", *extra]
    return command


def _plain_hydra(out: Path, n: int, sleep_s: float) -> List[str]:
    return [PYTHON, "benchmarks/plain_hydra_app.py", "-m", f"seed={_grid(n)}", f"sleep_s={sleep_s:g}",
            f"timings_dir={out / 'times'}", f"hydra.sweep.dir={out / 'multirun'}"]


def _baseline(kind: str) -> Callable[[Path, int, float], List[str]]:
    def command(out: Path, n: int, sleep_s: float) -> List[str]:
        return [PYTHON, "benchmarks/baselines.py", kind, "--trials", str(n), "--sleep-s", f"{sleep_s:g}",
                "--out", str(out)]
    return command


RUNNERS: Dict[str, Runner] = {r.name: r for r in (
    Runner("sweeper-pack", "sweeper, Ray, isolation=pack, 1 CPU/trial", CPUS, True,
           _sweeper("resources.isolation=pack", *NO_SINKS), True),
    Runner("sweeper-sinks", "same, W&B (offline) and report.html on, as by default", CPUS, True,
           _sweeper("resources.isolation=pack"), True),
    Runner("sweeper-node", "sweeper, Ray, isolation=node", 1, True,
           _sweeper("resources.isolation=node", *NO_SINKS), True),
    Runner("sweeper-local", "sweeper, executor=local (in the driver's process, no Ray)", 1, True,
           _sweeper("executor=local", "resources.isolation=pack", *NO_SINKS), True),
    Runner("hydra-plain", "plain Hydra app, BasicLauncher, in-process", 1, False, _plain_hydra, False),
    Runner("tune", "Ray Tune Tuner + grid_search, 1 CPU/trial", CPUS, True, _baseline("tune"), False),
    Runner("ray-tasks", "plain Ray tasks, 1 CPU, reused workers", CPUS, False, _baseline("ray-tasks"), False),
)}
WORKLOADS = {"trivial": 0.0, "sleep": SLEEP_S}


# -- one measured command -------------------------------------------------------------
@dataclass
class Measurement:
    runner: str
    workload: str
    trials: int
    slots: int
    sleep_s: float
    returncode: Optional[int]
    finished: int                   # trials that left a start and an end time
    wall_s: float
    to_first_s: float               # command start -> first trial start
    span_s: float                   # first trial start -> last trial end
    ready_to_end_s: float           # Ray up, trials about to be submitted -> last trial end

    @property
    def ideal_s(self) -> float:
        return self.trials * self.sleep_s / self.slots

    @property
    def per_trial_s(self) -> float:
        """Slot-seconds each trial costs beyond its own work, from the span."""
        return (self.span_s - self.ideal_s) * self.slots / self.trials


def _ready_at(runner: Runner, run: CommandRun, out: Path) -> float:
    if runner.sweeper:
        return run.first_line_at(READY_LINE) or float("nan")
    ready = out / "ready.json"
    return json.loads(ready.read_text())["ready_at"] if ready.exists() else float("nan")


def measure(runner: Runner, workload: str, trials: int, sleep_s: float, work: Path) -> Measurement:
    out = work / f"{runner.name}-{workload}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    run = run_timed(runner.command(out, trials, sleep_s), log=out / "command.log")
    times = sweeper_times(out / "results") if runner.sweeper else read_times(out / "times")
    first, last = span(times)
    m = Measurement(runner.name, workload, trials, runner.slots, sleep_s, run.returncode, len(times), run.wall_s,
                    first - run.started_at, last - first, last - _ready_at(runner, run, out))
    print(f"  {runner.name:<14} {workload:<8} wall {m.wall_s:6.1f} s  span {m.span_s:6.2f} s  "
          f"{m.finished}/{trials} trials  rc={run.returncode}", flush=True)
    if run.returncode != 0 or m.finished != trials:
        print(run.tail(15), file=sys.stderr)
    return m


def run_all(runners: Sequence[Runner], workloads: Sequence[str], trials: int, repeats: int,
            work: Path) -> List[Measurement]:
    results = []
    for rep in range(repeats):
        for workload in workloads:
            for runner in runners:
                results.append(measure(runner, workload, trials, WORKLOADS[workload], work / f"rep{rep}"))
    return results


# -- where a trial's time goes, in this process ---------------------------------------
def trial_spec(sleep_s: float = 0.0) -> dict:
    """The spec the Ray launcher would send for one trivial trial (through the same Trial.spec)."""
    from sweeper.plan import ClusterShape, plan_trials
    from sweeper.schema import root_config_from_dict

    root = root_config_from_dict({"workload": {"target": WORKLOAD, "steps": 1, "warmup_steps": 0,
                                               "params": {"sleep_s": sleep_s}},
                                  "resources": {"isolation": "pack", "cpus": 1},
                                  "wandb": {"enabled": False}, "run_id": "bench"})
    trial = plan_trials([([], root)], ClusterShape([float(CPUS)], [0.0]))[0]
    return trial.spec(root.sweep.name, root.run_id, os.getpid())


def zygote_round_trips(count: int) -> Dict[str, float]:
    """One trivial trial after another through a warm zygote, split into launch (spec,
    fork, until the child's started_at), run (started_at to ended_at: setup, fingerprint,
    probe, workload) and finish (steps and record files, exit, collecting them)."""
    from sweeper.isolation import TrialHost

    host, spec, parts = TrialHost(), trial_spec(), {"launch": [], "run": [], "finish": [], "total": []}
    start = time.perf_counter()
    host.run(spec, 60, {})                      # the zygote's own start, timed once
    zygote_start = time.perf_counter() - start
    outcomes = []
    for _ in range(count):
        called = time.time()
        outcome = host.run(spec, 60, {})
        returned = time.time()
        r = outcome.record
        parts["launch"].append(r.started_at - called)
        parts["run"].append(r.ended_at - r.started_at)
        parts["finish"].append(returned - r.ended_at)
        parts["total"].append(returned - called)
        outcomes.append(outcome)
    host.close()
    result = {f"{k}_ms": median(v) * 1e3 for k, v in parts.items()}
    result["zygote_start_s"] = zygote_start
    result["_outcomes"] = outcomes             # real records for the driver-side measurement
    return result


def driver_writes(outcomes: list, sizes: Sequence[int]) -> Dict[str, float]:
    """What Sweep.finish writes after every trial: the trial folder and the whole summary."""
    from sweeper.results import write_summary, write_trial

    config = {"workload": {"target": WORKLOAD}}
    out: Dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="sweeper-bench-") as tmp:
        for n in sizes:
            run, records = Path(tmp) / f"n{n}", []
            trial_s, summary_s = [], []
            for i in range(n):
                base = outcomes[i % len(outcomes)]
                record = dataclasses.replace(base.record, trial_id=f"{i:012x}-0", swept={"workload.seed": i})
                t0 = time.perf_counter()
                write_trial(run, record, config, base.files)
                t1 = time.perf_counter()
                records.append(record)
                write_summary(run, records)
                summary_s.append(time.perf_counter() - t1)
                trial_s.append(t1 - t0)
            out[f"write_trial_ms_n{n}"] = median(trial_s) * 1e3
            out[f"summary_last_ms_n{n}"] = summary_s[-1] * 1e3
            out[f"summary_total_s_n{n}"] = sum(summary_s)
    return out


# -- the report -----------------------------------------------------------------------
HEADERS = ["runner", "own process", "slots", "wall s", "wall / N s", "cmd -> 1st trial s", "span s",
           "ready -> last end s", "ideal span s", "per-trial cost s"]


def _row(runner: Runner, ms: List[Measurement]) -> list:
    pick = lambda attr: median([getattr(m, attr) for m in ms])
    wall = pick("wall_s")
    ok = all(m.returncode == 0 and m.finished == m.trials for m in ms)
    name = runner.label if ok else f"{runner.label} (FAILED: see command.log)"
    return [name, "yes" if runner.isolated else "no", runner.slots, wall, wall / ms[0].trials, pick("to_first_s"),
            pick("span_s"), pick("ready_to_end_s"), ms[0].ideal_s, pick("per_trial_s")]


def runs_table(results: List[Measurement], workload: str) -> str:
    rows = []
    for runner in RUNNERS.values():
        ms = [m for m in results if m.runner == runner.name and m.workload == workload]
        if ms:
            rows.append(_row(runner, ms))
    return markdown_table(HEADERS, rows)


def components_table(zygote: Dict[str, float], writes: Dict[str, float], sizes: Sequence[int]) -> str:
    rows = [["zygote start and its first trial (once a sweep: a fresh Python imports torch)",
             zygote["zygote_start_s"] * 1e3],
            ["one trivial trial through a warm zygote, total", zygote["total_ms"]],
            ["  launch: spec to disk, fork, until the child's started_at", zygote["launch_ms"]],
            ["  run: setup, fingerprint, probe, workload (started_at -> ended_at)", zygote["run_ms"]],
            ["  finish: steps.parquet, record, exit, files collected", zygote["finish_ms"]]]
    for n in sizes:
        rows += [[f"driver: write the trial folder (N={n})", writes[f"write_trial_ms_n{n}"]],
                 [f"driver: rewrite summary.parquet + csv after the last of {n} trials",
                  writes[f"summary_last_ms_n{n}"]],
                 [f"driver: summary rewritten after each of {n} trials (not done since the 2-s throttle), total", writes[f"summary_total_s_n{n}"] * 1e3]]
    return markdown_table(["where the time goes (in-process, no Ray)", "ms"], rows)


def report(results, zygote, writes, args, command: str) -> str:
    parts = [f"Machine: {machine_line()}; load average {args.load_before} before, {load_average()} after",
             f"Command: `{command}`",
             f"N = {args.trials} trials per runner, {args.repeats} run(s) each (medians shown); per-trial cost ="
             f" (span - ideal span) x slots / N."]
    for workload in args.workloads:
        title = "trivial trials (return at once)" if workload == "trivial" else f"trials that sleep {SLEEP_S:g} s"
        parts += [f"### {title}", runs_table(results, workload)]
    if zygote:
        parts += ["### where a trial's time goes", components_table(zygote, writes, SUMMARY_SIZES)]
    return "\n\n".join(parts) + "\n"


# -- main -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=TRIALS, help=f"trials per runner (default {TRIALS})")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each runner and workload (medians shown)")
    parser.add_argument("--runners", default=",".join(RUNNERS), help=f"comma-separated, of {','.join(RUNNERS)}")
    parser.add_argument("--workloads", default="trivial,sleep", help="comma-separated, of trivial,sleep")
    parser.add_argument("--no-components", action="store_true", help="skip the in-process breakdown")
    parser.add_argument("--out", type=Path, default=None, help="folder for logs and overhead.md "
                        "(default results/benchmarks/overhead-<time>)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    return parser


def parse(argv=None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.runners = [RUNNERS[name] for name in args.runners.split(",") if name]
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--workloads: unknown {unknown}; choose from {list(WORKLOADS)}")
    args.out = (args.out or ROOT / "results" / "benchmarks" / time.strftime("overhead-%Y%m%d-%H%M%S")).resolve()
    return args


def main(argv=None) -> None:
    args = parse(argv)
    command = "python benchmarks/overhead.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.dry_run:
        for runner in args.runners:
            for workload in args.workloads:
                out = args.out / "rep0" / f"{runner.name}-{workload}"
                print(" ".join(runner.command(out, args.trials, WORKLOADS[workload])))
        return
    print(f"overhead: {machine_line()}\n  logs under {args.out}", flush=True)
    args.load_before = load_average()
    results = run_all(args.runners, args.workloads, args.trials, args.repeats, args.out)
    zygote, writes = {}, {}
    if not args.no_components:
        zygote = zygote_round_trips(args.trials)
        writes = driver_writes(zygote.pop("_outcomes"), SUMMARY_SIZES)
    text = report(results, zygote, writes, args, command)
    (args.out / "overhead.md").write_text(text)
    (args.out / "overhead.json").write_text(json.dumps(
        {"machine": machine(), "runs": [{**asdict(m), "ideal_s": m.ideal_s, "per_trial_s": m.per_trial_s}
                                        for m in results], "zygote": zygote, "writes": writes}, indent=2))
    print("\n" + text)


if __name__ == "__main__":
    main()
