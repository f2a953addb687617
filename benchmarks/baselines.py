"""The Ray baselines that overhead.py runs next to sweeper, each as a command of its own:

    python benchmarks/baselines.py tune      --trials 24 --sleep-s 0 --out DIR   # Ray Tune grid
    python benchmarks/baselines.py ray-tasks --trials 24 --sleep-s 0 --out DIR   # plain Ray tasks

`tune`: a `Tuner` over `tune.grid_search` with Tune's defaults (each trial a fresh actor,
reuse_actors=False), 1 CPU per trial, the trainable calling the same workload function
with a Probe. `ray-tasks`: the floor, plain Ray tasks of 1 CPU that reuse their worker
process, so trials share a process (no isolation at all).

Each trial writes its start and end time into DIR/times; DIR/ready.json holds the moment
Ray was up and the trials about to be submitted. Neither imports torch in the trial: the
trivial workload does not need it, which makes these baselines as cheap as they can be.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import write_times   # noqa: E402

WORKLOAD = "tests.workloads_for_tests:quick"   # returns at once, or after params.sleep_s


def workload_config(seed: int, sleep_s: float):
    """The TrialConfig sweeper would hand the workload: one step, no warm-up."""
    from sweeper.schema import TrialConfig

    cfg = TrialConfig()
    cfg.workload.target, cfg.workload.seed = WORKLOAD, seed
    cfg.workload.steps, cfg.workload.warmup_steps = 1, 0
    cfg.workload.params = {"sleep_s": sleep_s}
    return cfg


def one_trial(seed: int, sleep_s: float, times_dir: str) -> float:
    """Body shared by both baselines: the workload with a Probe, timed like trial.json."""
    from sweeper.probe import Probe
    from sweeper.trial import load_workload

    started = time.time()
    load_workload(WORKLOAD)(workload_config(seed, sleep_s), Probe())
    ended = time.time()
    write_times(Path(times_dir), started, ended, pid=os.getpid())
    return ended


def _trainable(config):
    from ray import tune

    ended = one_trial(config["seed"], config["sleep_s"], config["times_dir"])
    tune.report({"ended_at": ended})


def run_tune(trials: int, sleep_s: float, out: Path) -> None:
    import ray
    from ray import tune

    ray.init(include_dashboard=False, logging_level=logging.WARNING)
    mark_ready(out)
    tuner = tune.Tuner(
        tune.with_resources(_trainable, {"cpu": 1}),
        param_space={"seed": tune.grid_search(list(range(trials))), "sleep_s": sleep_s,
                     "times_dir": str(out / "times")},
        run_config=tune.RunConfig(storage_path=str((out / "tune").resolve()), verbose=0),
    )
    results = tuner.fit()
    errors = sum(1 for r in results if r.error)
    ray.shutdown()
    print(f"tune: {len(results)} trial(s), {errors} error(s)")


def run_ray_tasks(trials: int, sleep_s: float, out: Path) -> None:
    import ray

    ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    mark_ready(out)
    task = ray.remote(num_cpus=1)(one_trial)
    ray.get([task.remote(seed, sleep_s, str(out / "times")) for seed in range(trials)])
    ray.shutdown()
    print(f"ray-tasks: {trials} trial(s)")


def mark_ready(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "ready.json").write_text(json.dumps({"ready_at": time.time()}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("tune", "ray-tasks"))
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--sleep-s", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    run = run_tune if args.kind == "tune" else run_ray_tasks
    run(args.trials, args.sleep_s, args.out)


if __name__ == "__main__":
    main()
