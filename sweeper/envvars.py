"""Environment variables read as Ray reads RAY_ADDRESS: one unset or empty is none. Light (os alone),
so the command's head start can ask it before Hydra is imported (sweeper/headstart.py)."""
from __future__ import annotations

import os
from typing import Optional

RAY_ADDRESS = "RAY_ADDRESS"       # conf/config.yaml's default for ray.address: `${sweeper.env:RAY_ADDRESS}`


def variable_or_null(name: str) -> Optional[str]:
    """The variable's value; None where it is unset or empty (OmegaConf's oc.env gives an empty
    string, which a key's check refuses as a likely unset variable of the user's own)."""
    return os.environ.get(name) or None


def ray_address() -> Optional[str]:
    """The cluster RAY_ADDRESS names, where it names one."""
    return variable_or_null(RAY_ADDRESS)
