"""Hydra's BasicSweeper, without its second composition of every job.

BasicSweeper composes each job of a batch once to check it (`validate_batch_is_legal`),
then the launcher composes it again. The sweeper's Ray launcher composes and checks
every job itself before any trial starts, so the first pass only doubles the start-up
(about 0.1 s a job). With any other launcher (hydra/launcher=basic) the check stays.
"""
from __future__ import annotations

from typing import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class SweeperGridSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from hydra_plugins.sweeper_ray_launcher.ray_launcher import SweeperRayLauncher

        if not isinstance(self.launcher, SweeperRayLauncher):
            super().validate_batch_is_legal(batch)
