"""How a sweep runs, not what a trial measures: repeats, sequential.*, overnight.*, ray.*, sweep.*."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from sweeper.schema._base import _require, _require_name

SPENDING = ("pocock", "obrien_fleming")
AUTO = "auto"
MAX_REPEATS = 10_000     # each repeat is a process of its own: past this, a typo (planning it would fill memory)
MAX_RAY_COUNT = 1024     # CPUs or GPUs of a local Ray: past this, a typo (a trial's threads follow its CPUs)


@dataclass
class SequentialConfig:
    # repeats=auto: rounds of repeats, each cell judged against its baseline after every round
    # and stopped once decided (sweeper/analysis/sequential.py, docs/analysis.md#repeats-auto).
    max_repeats: int = 7                 # a cell's most repeats; it stops there, decided or not
    first_round: Optional[int] = None    # repeats per cell before the first look; null: the fewest
                                         # with which the first look can decide (computed)
    spending: str = "obrien_fleming"     # how alpha is spent over the looks: obrien_fleming (most of it
                                         # kept for the last look: power) or pocock (more early stops)
    futility: float = 0.48               # an undecided cell stops as "no detectable change" once its
                                         # predictive power to end faster or slower (significant and
                                         # past analysis.min_effect) is below this

    def check(self) -> None:
        _require(isinstance(self.max_repeats, int) and 2 <= self.max_repeats <= MAX_REPEATS, "sequential.max_repeats",
                 f"must be 2 (a cell's own spread needs two repeats) to {MAX_REPEATS}, got {self.max_repeats!r}")
        _require(self.first_round is None or (isinstance(self.first_round, int)
                                              and 1 <= self.first_round <= self.max_repeats),
                 "sequential.first_round", f"must be null (computed) or 1 to sequential.max_repeats="
                 f"{self.max_repeats}, got {self.first_round!r}")
        _require(self.spending in SPENDING, "sequential.spending", f"must be one of {SPENDING}, got {self.spending!r}")
        _require(0 <= self.futility < 1, "sequential.futility",
                 f"must be at least 0 and below 1 (0: never stop for futility), got {self.futility}")


def check_repeats(repeats: Any) -> None:
    """`repeats`: a whole number of repeats per cell, or auto (SequentialConfig)."""
    fixed = isinstance(repeats, int) and not isinstance(repeats, bool)
    _require(repeats == AUTO or (fixed and 1 <= repeats <= MAX_REPEATS), "repeats",
             f"must be 1 to {MAX_REPEATS} (each repeat is a process of its own), or auto (repeats until each "
             f"cell is decided), got {repeats!r}")


# Sections the schema no longer has, and the one line that says what to use instead.
REMOVED = {"adaptive": "adaptive.* is gone: pass repeats=auto instead (each cell repeats until it is decided "
                       "against its baseline; bounds: sequential.max_repeats; docs/analysis.md#repeats-auto)"}


def removed_line(dotted: str) -> Optional[str]:
    """The line for a key of a removed section, None for any other key."""
    return REMOVED.get(str(dotted).split(".")[0])


@dataclass
class OvernightConfig:
    # A suite of sweeps safe to start from cron or a systemd timer (sweeper/overnight.py, docs/overnight.md).
    sweeps: List[str] = field(default_factory=list)  # empty: an ordinary sweep; names: run each in turn
    budget_s: Optional[float] = None     # the night's length: past it nothing new starts; null: no limit
    lock_file: str = "~/.cache/sweeper/overnight.lock"  # one suite at a time per lock file (fcntl.flock)
    deadline: Optional[float] = None     # epoch seconds after which a sweep starts no trial (the suite sets it)
    alerts: Optional[str] = None         # the regression check, "module:function" (night folder, night.json dict)
                                         # -> list of alerts; any alert: exit 3. null: failures alone decide

    def check(self) -> None:
        _require(self.budget_s is None or self.budget_s > 0, "overnight.budget_s", f"must be positive or null, got {self.budget_s}")
        _require(bool(str(self.lock_file).strip()), "overnight.lock_file", "must be a path")
        _require(self.alerts is None or ":" in self.alerts, "overnight.alerts",
                 f"must look like 'package.module:function', got {self.alerts!r}")
        for name in self.sweeps:
            _require(isinstance(name, str) and name and name != "overnight", "overnight.sweeps",
                     f"must list sweep names (conf/sweep/*.yaml) other than overnight, got {name!r}")
            _require_name("overnight.sweeps", name)
        twice = sorted({n for n in self.sweeps if self.sweeps.count(n) > 1})
        _require(not twice, "overnight.sweeps", f"names {', '.join(map(repr, twice))} more than once; a night runs each "
                 "sweep once, into one folder of that name (repeats=N repeats its trials)")


@dataclass
class RayConfig:
    address: Optional[str] = None        # None: start a local Ray of the sweep's own (even beside a
                                         # `ray start` cluster on this machine); "auto" or "host:port": attach
    num_cpus: Optional[int] = None       # for a local Ray only
    num_gpus: Optional[int] = None       # for a local Ray only
    node_ip_address: Optional[str] = None  # this host's address as the cluster knows it (multi-homed hosts)
    runtime_env: Dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        _require(self.address in (None, "auto") or head_of(self.address) is not None, "ray.address",
                 f"must be auto, host:port or ray://host:port (a running cluster's head, as `ray start --head` "
                 f"prints it), got {self.address!r}"
                 + (" (from RAY_ADDRESS; ray.address=null starts a local Ray instead)"
                    if came_from_ray_address(self.address) else ""))
        _require(self.node_ip_address is None or ip_literal(self.node_ip_address), "ray.node_ip_address",
                 f"must be one of this host's IP addresses (e.g. 10.0.0.5), got {self.node_ip_address!r}")
        for name in ("num_cpus", "num_gpus"):     # Ray's own refusal of a negative count was a traceback
            value = getattr(self, name)
            _require(value is None or 0 <= value <= MAX_RAY_COUNT, f"ray.{name}",
                     f"must be 0 to {MAX_RAY_COUNT}, or null (all of this machine's), got {value}")


def ip_literal(text: Any) -> bool:
    """An IPv4 or IPv6 address written out: Ray waits on any other node_ip_address for minutes."""
    import ipaddress

    try:
        ipaddress.ip_address(str(text))
    except ValueError:
        return False
    return True


def came_from_ray_address(address: Any) -> bool:
    """Whether ray.address's value is RAY_ADDRESS's (conf/config.yaml's default), which the user
    did not type on this command line: a line about it then says so."""
    from sweeper.envvars import ray_address

    return address is not None and ray_address() == address


def head_of(address: Any) -> Optional[Tuple[str, int]]:
    """(host, port) of a Ray address `host:port` or `ray://host:port` ([v6]:port too); None if not one."""
    if not isinstance(address, str):
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/ @"):
        return None
    return host, int(port)


@dataclass
class SweepMeta:
    name: str = "single"                 # a plain name: the run goes to <results_dir>/<name>/<run_id>
    description: str = ""

    def check(self) -> None:
        _require_name("sweep.name", self.name)
