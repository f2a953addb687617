"""The adapter between Hydra and the sweep driver: Hydra's job list in, JobReturns out.

Composes and checks every job of the grid (once per set of group choices, _compose.py),
hands them to `sweeper.entry.run_jobs` (a sweep's driver knows neither Hydra nor Ray), and
records its exit code. Whether trials run on Ray or in this process is the driver's
`executor` setting, not this plugin's.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweeper_ray_launcher._compose import JobComposer
from hydra_plugins.sweeper_ray_launcher._redact import redacted_yaml, remember_credentials
from sweeper import exitcodes
from sweeper.entry import run_jobs
from sweeper.sweep import Job
from sweeper.errors import SweeperError
from sweeper.executors import begin_early
from sweeper.interrupts import interrupted, stop_signals
from sweeper.schema import root_config_from_dict
from sweeper.timeline import mark


def app_values(sweep_config: DictConfig) -> Dict[str, Any]:
    """The app's config, resolved, without Hydra's own node (what Hydra's run_job hands the
    task), read key by key rather than from a second deep copy of the whole config."""
    return {key: OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
            for key, node in ((k, sweep_config[k]) for k in sweep_config if k != "hydra")}


def compose_all(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[Job]:
    composer = JobComposer(launcher.hydra_context.config_loader, launcher.config)
    jobs = []
    for i, overrides in enumerate(job_overrides):
        sweep_config = composer.compose(overrides, initial_job_idx + i)
        HydraConfig.instance().set_config(sweep_config)
        values = app_values(sweep_config)
        jobs.append(Job(list(overrides), root_config_from_dict(values), values))
        if i == 0:
            begin_early(values, jobs[0].config)     # Ray starts while the rest is composed, checked and planned
    mark("jobs_composed")
    return jobs


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
    remember_credentials(launcher.config, job_overrides)    # before anything is written or printed
    with stop_signals():        # Ctrl-C and SIGTERM: one line and exit 130 from here on (sweeper/interrupts.py)
        try:
            jobs = compose_all(launcher, job_overrides, initial_job_idx)
        except SweeperError as exc:
            print(f"error: {exc}", file=sys.stderr)     # its message was redacted when it was made
            exitcodes.report(exc.code)
            return []
        except KeyboardInterrupt:
            exitcodes.report(interrupted("while composing the configs: nothing was written"))
            return []
        exitcodes.report(run_jobs(jobs, redacted_yaml(launcher.config)))   # multirun.yaml, as Hydra writes it
    return [JobReturn(overrides=j.overrides, status=JobStatus.COMPLETED, _return_value=None, task_name="sweeper")
            for j in jobs]
