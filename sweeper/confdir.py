"""Where sweeper's Hydra configs are.

The repository keeps them in a top-level `conf/` beside `sweeper/`; building the wheel maps that
folder into the package as `sweeper/conf` (setup.py), so an installed sweeper finds them inside
itself from any folder. An editable install or PYTHONPATH runs the package from the checkout,
where the configs are the `conf/` next to it.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """The packaged configs when installed from a wheel, else the checkout's top-level conf/."""
    shipped = PACKAGE / "conf"
    return shipped if (shipped / "config.yaml").is_file() else PACKAGE.parent / "conf"
