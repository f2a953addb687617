"""Dataset random access: the time of one `column[i]` on a pyarrow-backed column against
the same int64 values as a Python list and as a numpy array.

Each step reads `accesses` values at random positions (the same positions for every
backend) from the `backend` the steps measure; each read returns a Python int. With
compare=true every other backend is timed over the same positions as figures:

    access_ms_<backend>   milliseconds per access: arrow, list, numpy, datasets
    arrow_over_list       how many times slower an arrow access is than a list's

`datasets` is a Hugging Face `datasets` Column (`dataset["x"]`), timed only when that
package is installed (it is not a dependency). The seed article saw 3.39 ms per access
there against 0.0003 ms for a Python list.
"""
from __future__ import annotations

import importlib.util
import time
from typing import Any, Callable, Dict, List

import numpy as np
import pyarrow as pa

from sweeper.spec import typed_params
from workloads.playbook.specs import DATASET_ACCESS as SPEC, AccessParams  # noqa: F401

CHUNK_ROWS = 65_536     # a column read from parquet or a datasets cache comes in chunks; so does this one


def columns(values: np.ndarray, backends: List[str]) -> Dict[str, Callable[[int], Any]]:
    """backend -> a function reading one value (as a Python int) at a position."""
    out: Dict[str, Callable[[int], Any]] = {}
    for name in backends:
        if name == "arrow":
            column = pa.chunked_array([values[i:i + CHUNK_ROWS] for i in range(0, len(values), CHUNK_ROWS)])
            out[name] = lambda i, c=column: c[i].as_py()
        elif name == "list":
            out[name] = values.tolist().__getitem__
        elif name == "numpy":
            out[name] = lambda i, a=values: int(a[i])
        elif name == "datasets":
            import datasets

            column = datasets.Dataset.from_dict({"x": values})["x"]   # a Column (datasets >= 4): reads arrow per access
            out[name] = column.__getitem__
    return out


def time_per_access(read: Callable[[int], Any], positions: List[int], tries: int = 5) -> float:
    """Seconds per access: the median of `tries` passes over the positions (one pass lasts
    microseconds, so a single one can be all preemption on a busy machine)."""
    times = []
    for _ in range(tries):
        start = time.perf_counter()
        for i in positions:
            read(i)
        times.append((time.perf_counter() - start) / len(positions))
    return float(np.median(times))


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(AccessParams, cfg.workload.params)
    rng = np.random.default_rng(cfg.workload.seed)
    values = rng.integers(0, 1 << 40, size=params.rows, dtype=np.int64)
    installed = [b for b in ("arrow", "list", "numpy") if b != params.backend]
    if importlib.util.find_spec("datasets") is not None and params.backend != "datasets":
        installed.append("datasets")
    backends = [params.backend] + (installed if params.compare else [])
    readers = columns(values, backends)
    probe.count_between_steps = False     # drawing positions between steps is preparation, not access time
    read = readers[params.backend]
    while probe.more(cfg.workload.steps):
        positions = rng.integers(0, params.rows, size=params.accesses).tolist()
        with probe.step(items=params.accesses):
            with probe.phase("access"):
                for i in positions:
                    read(i)
    positions = rng.integers(0, params.rows, size=params.accesses).tolist()
    steps = [r["step_s"] for r in probe.measured()]
    out: Dict[str, Any] = {f"access_ms_{params.backend}": float(np.median(steps)) / params.accesses * 1e3,
                           "rows": params.rows}
    for name in backends[1:]:
        read_other = readers[name]
        time_per_access(read_other, positions[:10])       # warm
        out[f"access_ms_{name}"] = time_per_access(read_other, positions) * 1e3
    if "access_ms_arrow" in out and "access_ms_list" in out:
        out["arrow_over_list"] = out["access_ms_arrow"] / out["access_ms_list"]
    if "datasets" not in backends:
        out["datasets_installed"] = False
    return out
