"""Hydra's BasicSweeper, without its second composition of every job and without its
early run folder.

BasicSweeper composes each job of a batch once to check it (`validate_batch_is_legal`),
then the launcher composes it again. The sweeper's Ray launcher composes and checks
every job itself before any trial starts, so the first pass only doubles the start-up
(about 0.1 s a job). BasicSweeper also creates `hydra.sweep.dir` and writes
multirun.yaml into it before anything is checked; with the sweeper's launcher the driver
creates the run folder itself, atomically and inside results_dir, only once trials will
run, and writes multirun.yaml there (sweeper/runfolder.py). Any other launcher
(hydra/launcher=basic) is refused in one line before anything is written.
"""
from __future__ import annotations

from typing import Any, List

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser


class SweeperGridSweeper(BasicSweeper):
    def sweep(self, arguments: List[str]) -> Any:
        from sweeper.interrupts import raise_if_stopped
        from sweeper.run_mode import ours

        raise_if_stopped()              # a stop that Hydra's start swallowed (sweeper/interrupts.py) ends here
        if not ours(type(self.launcher).__module__):    # refused before Hydra writes a folder for it
            from sweeper.entry import refuse_other_launcher

            refuse_other_launcher()
            return []
        from sweeper.grid import check_grid, check_params

        check_params(self.params)
        params = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params)
        check_grid(overrides, self.max_batch_size)          # before Hydra builds the whole product
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        returns, first = [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            returns.append(self.launcher.launch(batch, initial_job_idx=first))
            first += len(batch)
        return returns
