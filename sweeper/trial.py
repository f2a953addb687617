"""The trial runner: runs in the trial's own process, never in the driver.

Sets threads, seeds and device, builds the probe, calls the workload, and writes
the trial's files (steps.parquet, record.json) into a scratch folder that the
caller moves into the results folder. A workload that raises becomes a record
with status "failed", its error type and message: a row, not a crash.
"""
from __future__ import annotations

import importlib
import random
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from sweeper import youngcollector
from sweeper.files import write_json_atomic, write_with
from sweeper.probe import Probe
from sweeper.record import TrialRecord
from sweeper.timeline import mark
from sweeper.redact import redact
from sweeper.schema import TrialConfig

RECORD_FILE = "record.json"
STEPS_FILE = "steps.parquet"
LOG_FILE = "trial.log"


def load_workload(target: str) -> Callable[..., Any]:
    module_name, _, func_name = target.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, func_name)
    except AttributeError:
        raise AttributeError(f"workload.target={target!r}: module {module_name!r} has no {func_name!r}") from None


def resolve_device(wanted: str) -> str:
    import torch

    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("workload.device=cuda but this trial has no visible GPU; ask for resources.gpus=1")
    return wanted


def setup(cfg: TrialConfig, num_cpus: float) -> Dict[str, Any]:
    """Threads and seeds; Ray's OMP_NUM_THREADS alone left torch at one thread."""
    import numpy as np
    import torch

    threads = cfg.workload.threads or max(1, int(num_cpus))
    torch.set_num_threads(threads)
    random.seed(cfg.workload.seed)
    np.random.seed(cfg.workload.seed)
    torch.manual_seed(cfg.workload.seed)
    cfg.workload.device = resolve_device(cfg.workload.device)
    limit_host_memory(cfg.resources.memory_limit_gb)
    return {"threads": threads, "device": cfg.workload.device}


def failure_status(exc: BaseException) -> str:
    """"oom" for host MemoryError and for PyTorch's (CUDA) OutOfMemoryError, else "failed"."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return "oom"
    return "oom" if "out of memory" in str(exc).lower() and isinstance(exc, RuntimeError) else "failed"


def memory_at_failure() -> Dict[str, Any]:
    """What memory the trial held when it stopped: host RSS, and the CUDA peaks if it used CUDA."""
    import sys

    import psutil

    figures: Dict[str, Any] = {"host_rss_gb_at_end": psutil.Process().memory_info().rss / 1e9}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        from sweeper.measure.memory import cuda_peaks

        peaks = cuda_peaks(torch)
        figures["cuda_max_allocated_gb_at_end"] = peaks["allocated_bytes"] / 1e9
        figures["cuda_max_reserved_gb_at_end"] = peaks["reserved_bytes"] / 1e9
    return figures


def limit_host_memory(limit_gb: Optional[float]) -> None:
    """Caps the trial's address space at what it has mapped now plus `limit_gb`, so a
    runaway trial gets a MemoryError of its own instead of taking the machine down."""
    if not limit_gb:
        return
    import resource

    import psutil

    mapped = psutil.Process().memory_info().vms
    cap = int(mapped + limit_gb * 1e9)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def write_steps(path: Path, rows: list) -> None:
    import pandas as pd

    write_with(path, lambda tmp: pd.DataFrame(rows).to_parquet(tmp, index=False))


def build_probe(cfg: TrialConfig, scratch: Path) -> Probe:
    """CUDA events, CUDA memory and NVML on a GPU trial, the host clock otherwise; profiles
    and other files go to the scratch folder, which comes back as the trial folder."""
    return Probe.for_trial(cfg.probe, cfg.workload.device, cfg.workload.warmup_steps, out_dir=scratch)


def execute(spec: Dict[str, Any], scratch: Path) -> TrialRecord:
    """Runs one trial and writes its record; never raises for a workload's failure."""
    mark("trial_start")
    record = TrialRecord.for_spec(spec, started_at=time.time())
    cfg: TrialConfig = spec["config"]
    probe = Probe(warmup_steps=cfg.workload.warmup_steps)   # replaced once the device is known
    rows = None
    try:
        from sweeper.fingerprint import fingerprint

        record.resources.update(setup(cfg, spec["num_cpus"]))
        mark("trial_set_up")                # torch imported: in a trial of executor=local, its first import
        record.fingerprint = fingerprint()
        mark("fingerprinted")
        probe = build_probe(cfg, scratch)
        workload = load_workload(cfg.workload.target)   # imported under the start's wide young generation
        youngcollector.restore()       # called under the process's own thresholds
        with probe:     # sampler and profile run around the workload and stop even when it raises
            mark("workload_start")
            extra = workload(cfg, probe) or {}
            mark("workload_end")
        rows = probe.rows                     # read back once: the summary and steps.parquet share them
        record.figures = {**probe.figures, **extra}
        record.summary = probe.summary(rows)
        record.status = "ok"
    except Exception as exc:   # a failed trial is a row: keep its type and message
        record.status = failure_status(exc)
        record.error_type = type(exc).__name__
        record.error_message = str(exc)[-2000:]
        record.figures = {**probe.figures, **memory_at_failure()}
        traceback.print_exc()
    probe.stop()
    record.warnings = probe.warnings
    record.ended_at = time.time()
    if rows is None:
        rows = probe.rows
    if rows:
        write_steps(scratch / STEPS_FILE, redact(rows))   # parquet cannot be patched after it is written
    write_json_atomic(scratch / RECORD_FILE, record.to_dict())
    mark("trial_end")
    return record
