"""A user's own `conf/` beside their code adds sweeps and workloads to the shipped ones.

sweeper's configs ship inside the package (sweeper/conf in the wheel, the checkout's conf/
otherwise: sweeper/confdir.py). When `python -m sweeper` runs
in a folder that has a `conf/` folder, that folder joins Hydra's config search path, so
`conf/sweep/mine.yaml` there makes `+sweep=mine` work and `conf/workload/NAME.yaml` adds
`workload=NAME`. The shipped configs come first: a user file of the same name does not
replace one (give it another name). Hydra's own `hydra.searchpath=[file://...]` override
adds further folders after this one.

Hydra runs every installed search-path plugin for every Hydra app, so this one touches
only a search path whose primary config folder is sweeper's own.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Optional

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

PROVIDER = "sweeper: ./conf"


def _shipped_conf() -> Optional[Path]:
    if importlib.util.find_spec("sweeper") is None:    # another Hydra app, without sweeper installed
        return None
    from sweeper.confdir import conf_dir               # light: imports nothing of the package's own
    return conf_dir()


def _as_dir(path: str) -> Optional[Path]:
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif "://" in path:
        return None
    return Path(path).resolve()


class SweeperSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        mains = [_as_dir(e.path) for e in search_path.get_path() if e.provider == "main" and e.path]
        shipped = _shipped_conf()
        if shipped is None or shipped not in mains:
            return
        user = Path(os.getcwd()) / "conf"
        if user.is_dir() and user.resolve() != shipped:
            search_path.append(provider=PROVIDER, path=f"file://{user.resolve()}")
