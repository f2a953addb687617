"""What a user would otherwise write: a plain Hydra app whose task function calls the
workload in-process, run with Hydra's BasicLauncher (one job after another, all in the
one Python process, nothing isolating one trial from the next).

    python benchmarks/plain_hydra_app.py -m seed=0,1,2 sleep_s=0 timings_dir=/tmp/t

Each job writes its start and end time to `timings_dir`, as sweeper's trial.json does.
Like the Ray Tune baseline, it does not import torch: the trivial workload does not need
it, so this baseline is as cheap as it can be.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import write_times          # noqa: E402
from benchmarks.baselines import workload_config     # noqa: E402
from sweeper.probe import Probe                      # noqa: E402
from sweeper.trial import load_workload              # noqa: E402


@dataclass
class PlainConfig:
    target: str = "tests.workloads_for_tests:quick"
    seed: int = 0
    sleep_s: float = 0.0
    timings_dir: str = "/tmp/plain-hydra-timings"


ConfigStore.instance().store(name="plain", node=PlainConfig)


@hydra.main(version_base="1.3", config_path=None, config_name="plain")
def main(cfg: PlainConfig) -> None:
    started = time.time()
    load_workload(cfg.target)(workload_config(cfg.seed, cfg.sleep_s), Probe())
    write_times(Path(cfg.timings_dir), started, time.time())


if __name__ == "__main__":
    main()
