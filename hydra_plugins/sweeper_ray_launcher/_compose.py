"""Composes every job of a sweep the way Hydra would, once per distinct set of group choices.

Hydra's `load_sweep_config` builds each job from scratch: defaults list, every config
file, deep copies; about 0.1-0.2 s a job, which made the composing of a grid most of a
short sweep's start-up. Jobs that choose the same config groups (all of a usual grid)
differ only in value overrides, so one composition per set of group choices is the
template, and each job is a copy of it with its value overrides applied by Hydra's own
`_apply_overrides_to_config`, in the same order and with the same errors. The result is
the config `load_sweep_config` returns (tests/test_compose.py compares them).

A job whose overrides are the command line's own (a sweep of one job, no sweep syntax) is the
master config Hydra composed for the multirun, copied: the same config files and overrides, in the
same order. That saves the one composition such a sweep would make: 0.14 s of a one-trial
`executor=local` sweep's 2.5 s here, 0.13 s of 4.5 s on an H200 (docs/performance.md). Not where a config group is left missing (`???`): the multirun's
composition skips it, where the job's must fail with Hydra's own line.
"""
from __future__ import annotations

import copy
from typing import Dict, List, Sequence, Tuple

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict


def _meaning(overrides: Sequence[Override]) -> List[tuple]:
    """What each override does, whatever its spelling: Hydra's sweeper writes a job's line again from
    its parsed value (`a\\:b` for `a:b`, `True` for `true`)."""
    return [(o.type, o.key_or_group, o.package, type(o.value()), o.value()) for o in overrides]


class JobComposer:
    def __init__(self, config_loader, master: DictConfig):
        self.loader, self.master = config_loader, master
        self.parser = OverridesParser.create()
        self.templates: Dict[Tuple[str, ...], DictConfig] = {}
        self.groups: Dict[str, bool] = {}     # override key -> is a config group (a look on disk)
        choices = master.hydra.runtime.choices
        self.master_is_a_job = not any(OmegaConf.is_missing(choices, group) for group in choices)
        self.master_overrides = _meaning(self.parser.parse_overrides(list(master.hydra.overrides.task)))

    def compose(self, overrides: Sequence[str], index: int) -> DictConfig:
        parsed = self.parser.parse_overrides(list(overrides))
        if self.master_is_a_job and _meaning(parsed) == self.master_overrides:
            return self._numbered(copy.deepcopy(self.master), parsed, index)
        group_lines = tuple(o.input_line for o in parsed if self._is_group(o))
        if group_lines not in self.templates:
            self.templates[group_lines] = self.loader.load_sweep_config(self.master, list(group_lines))
        cfg = copy.deepcopy(self.templates[group_lines])
        ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if not self._is_group(o)], cfg)
        return self._numbered(cfg, parsed, index)

    def _numbered(self, cfg: DictConfig, parsed: List[Override], index: int) -> DictConfig:
        """The job's own fields: the overrides Hydra records, its number, the master's resolver cache."""
        self._record_overrides(cfg, parsed)
        with open_dict(cfg):
            cfg.hydra.job.num = index
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        return cfg

    def _is_group(self, override: Override) -> bool:
        key = override.key_or_group
        if key not in self.groups:
            self.groups[key] = self.loader.repository.group_exists(key)
        return self.groups[key]

    def _record_overrides(self, cfg: DictConfig, parsed: List[Override]) -> None:
        """What Hydra's composition writes under hydra.overrides and hydra.job.override_dirname."""
        app = [o for o in parsed if not o.is_hydra_override()]
        hydra_lines = list(self.master.hydra.overrides.hydra) + [o.input_line for o in parsed if o.is_hydra_override()]
        job = cfg.hydra.job
        with open_dict(cfg):
            cfg.hydra.overrides.task = [o.input_line for o in app]
            cfg.hydra.overrides.hydra = hydra_lines
            job.override_dirname = get_overrides_dirname(
                overrides=app, kv_sep=job.config.override_dirname.kv_sep,
                item_sep=job.config.override_dirname.item_sep,
                exclude_keys=job.config.override_dirname.exclude_keys)
