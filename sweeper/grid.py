"""The grid a sweep's overrides make, checked before Hydra builds it.

Hydra's BasicSweeper expands every axis and their whole product into lists at once, so a typo
such as `range(1,3000000)` fills memory before anything says so, an empty axis (`range(5,1)`)
leaves no job to compose, and a bad `max_batch_size` is an assertion. Each becomes one line here.
"""
from __future__ import annotations

from itertools import islice
from typing import Any, Dict, Mapping, Sequence

from sweeper.errors import ConfigError

MAX_GRID_POINTS = 100_000    # jobs composed one by one (about 0.01 s each): past this, a typo


def check_params(params: Any) -> None:
    """`hydra.sweeper.params` (a sweep file's grid) maps keys to values: Hydra's own reading of it
    (BasicSweeper._parse_config) raised an AttributeError on anything else."""
    if params is not None and not isinstance(params, Mapping):
        raise ConfigError(f"hydra.sweeper.params: must map dotted keys to values (data.num_workers: 0,2,4), "
                          f"got {params!r}")


def axis_length(override: Any, limit: int) -> int:
    """How many values an override gives (1 for a plain one), counting at most `limit` + 1."""
    if not override.is_sweep_override() or not override.is_discrete_sweep():
        return 1                                    # an interval: Hydra's own refusal says it (faults.KNOWN)
    key = override.get_key_element()
    try:
        return sum(1 for _ in islice(override.sweep_string_iterator(), limit + 1))
    except ValueError as exc:                       # range(0,4,0): Python's range refuses a step of 0
        raise ConfigError(f"{key}: {exc}; give a step that is not 0") from None


def check_grid(overrides: Sequence[Any], max_batch_size: Any) -> int:
    """The number of grid points (the last override of a key wins, as in Hydra); ConfigError
    for an empty axis, a grid past MAX_GRID_POINTS or a `max_batch_size` that is not a count."""
    if max_batch_size is not None and (isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int)
                                       or max_batch_size < 1):
        raise ConfigError(f"hydra.sweeper.max_batch_size: must be a whole number of at least 1, or null, "
                          f"got {max_batch_size!r}")
    last: Dict[str, Any] = {override.get_key_element(): override for override in overrides}   # Hydra's rule
    points = 1
    for key, override in last.items():
        length = axis_length(override, MAX_GRID_POINTS)
        if length == 0:
            raise ConfigError(f"{key}: gives no value (an empty range or list); give at least one")
        points *= length
        if points > MAX_GRID_POINTS:
            raise ConfigError(f"{key}: makes the grid more than {MAX_GRID_POINTS:,} points; a typo? "
                              f"sweep fewer values, or split the grid into sweeps")
    return points
