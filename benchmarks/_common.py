"""Shared by the benchmark scripts: run a command and time it, read trial start and end
times, describe the machine, and print markdown tables.

Nothing here imports Ray, torch or Hydra, so every script's `--help` stays instant.
"""
from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
READY_LINE = re.compile(r"^sweep '.*': \d+ trial\(s\) on ")   # printed just before the first submit


@dataclass
class CommandRun:
    """One timed command: wall time, exit code and every output line with its arrival time."""
    argv: List[str]
    started_at: float                                    # Unix seconds, just before the process started
    wall_s: float = float("nan")
    returncode: Optional[int] = None
    lines: List[Tuple[float, str]] = field(default_factory=list)   # (seconds since start, text)

    def first_line_at(self, pattern: "re.Pattern[str]") -> Optional[float]:
        """Unix time at which the first output line matching `pattern` arrived."""
        for offset, text in self.lines:
            if pattern.search(text):
                return self.started_at + offset
        return None

    def tail(self, count: int = 30) -> str:
        return "\n".join(text for _, text in self.lines[-count:])


def bench_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment for a benchmarked command: the tree on PYTHONPATH, unbuffered output."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled", **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_timed(argv: Sequence[str], env: Optional[Dict[str, str]] = None, timeout_s: float = 600,
              log: Optional[Path] = None, cwd: Optional[Path] = None) -> CommandRun:
    """Runs `argv` from the project root (or `cwd`), timing it from just before the start to its exit."""
    run = CommandRun(argv=list(argv), started_at=time.time())
    start = time.monotonic()
    proc = subprocess.Popen(run.argv, cwd=cwd or ROOT, env=env or bench_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    try:
        for line in proc.stdout:
            run.lines.append((time.monotonic() - start, line.rstrip("\n")))
        run.returncode = proc.wait()
    finally:
        killer.cancel()
    run.wall_s = time.monotonic() - start
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(" ".join(run.argv) + "\n" + "".join(f"[{o:7.2f}] {t}\n" for o, t in run.lines))
    return run


# -- trial start and end times ------------------------------------------------------
def sweeper_times(results_dir: Path) -> List[Dict[str, float]]:
    """started_at/ended_at of every finished trial under a sweeper results folder."""
    out = []
    for path in Path(results_dir).glob("*/*/trials/*/trial.json"):
        record = json.loads(path.read_text())
        if record.get("started_at") and record.get("ended_at"):
            out.append({"started_at": record["started_at"], "ended_at": record["ended_at"],
                        "status": record.get("status"), "figures": record.get("figures") or {},
                        "fingerprint": record.get("fingerprint") or {}, "worker_pid": record.get("worker_pid")})
    return out


def write_times(folder: Path, started_at: float, ended_at: float, **extra) -> None:
    """A baseline's trial writes its own times, one small file per trial (no shared file to lock)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{os.getpid()}-{time.monotonic_ns()}.json"
    (folder / name).write_text(json.dumps({"started_at": started_at, "ended_at": ended_at, **extra}))


def read_times(folder: Path) -> List[Dict[str, float]]:
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def span(times: Iterable[Dict[str, float]]) -> Tuple[float, float]:
    """(first start, last end) in Unix seconds; NaNs when nothing finished."""
    times = list(times)
    if not times:
        return float("nan"), float("nan")
    return min(t["started_at"] for t in times), max(t["ended_at"] for t in times)


def median(values: Sequence[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


# -- the machine and the table ------------------------------------------------------
def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def machine() -> Dict[str, str]:
    from sweeper.fingerprint import cpu_model, package_versions

    versions = package_versions(("torch", "ray", "hydra-core"))
    return {"cpus": str(os.cpu_count()), "cpu": cpu_model(), "memory": f"{_memory_gib():.1f} GiB",
            "python": platform.python_version(), "torch": versions.get("torch", "-"),
            "ray": versions.get("ray", "-"), "hydra-core": versions.get("hydra-core", "-"), "host": platform.node()}


def machine_line() -> str:
    m = machine()
    return (f"{m['cpus']} CPUs ({m['cpu']}), {m['memory']}, Python {m['python']}, torch {m['torch']}, "
            f"Ray {m['ray']}, Hydra {m['hydra-core']}")


def load_average() -> str:
    """The 1-minute load average: other work on the machine inflates every figure."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "-"


def fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths)) + " |"
    return "\n".join([line(headers), "| " + " | ".join("-" * w for w in widths) + " |", *map(line, cells)])
