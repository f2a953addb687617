"""DataLoader start-up: the time to the first batch of each epoch, and what starting the
worker processes costs, with and without `persistent_workers`.

One step is one epoch over a small in-memory dataset: phase "startup" from `iter(loader)`
to its first batch, phase "data_wait" for the rest of the epoch. Without persistent
workers every epoch starts its workers again; with them only the first does. Figures:

    startup_epoch<k>_s   each epoch's start-up (the steps' setting)
    startup_first_s      epoch 0's; startup_later_s: the median of the later epochs
    with compare=true, the other setting over as many epochs, and num_workers=0 once:
    startup_later_persistent_s, startup_later_fresh_s, and
    worker_start_s       the first start-up with workers less the one without any
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List

import torch
from torch.utils.data import DataLoader, Dataset

from sweeper.spec import typed_params
from workloads.playbook.specs import LOADER_STARTUP as SPEC, StartupParams  # noqa: F401


class Samples(Dataset):
    """Fixed byte tensors: the loader's own cost, not decoding, is what is timed."""

    def __init__(self, count: int, sample_kb: int):
        self.count, self.numel = count, sample_kb * 1024 // 4

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((self.numel,), i, dtype=torch.int32)


def make_loader(params: StartupParams, num_workers: int, persistent: bool) -> DataLoader:
    dataset = Samples(params.batch_size * params.batches, params.sample_kb)
    return DataLoader(dataset, batch_size=params.batch_size, num_workers=num_workers,
                      persistent_workers=persistent and num_workers > 0)


def epoch_startups(loader: DataLoader, epochs: int) -> List[float]:
    """Start-up of each epoch, without the probe (the settings compare=true adds)."""
    out = []
    for _ in range(epochs):
        start = time.perf_counter()
        it = iter(loader)
        next(it)
        out.append(time.perf_counter() - start)
        for _ in it:
            pass
        del it
    return out


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(StartupParams, cfg.workload.params)
    loader = make_loader(params, params.num_workers, params.persistent_workers)
    startups: List[float] = []
    while probe.more(cfg.workload.steps):
        with probe.step(items=params.batches):
            start = time.perf_counter()
            with probe.phase("startup"):
                it = iter(loader)
                next(it)
            startups.append(time.perf_counter() - start)
            with probe.phase("data_wait"):
                for _ in it:
                    pass
            del it                       # without persistent workers this ends them
    del loader
    out: Dict[str, Any] = {f"startup_epoch{k}_s": s for k, s in enumerate(startups)}
    out.update(startup_figures(startups, "startup"))
    if params.compare:
        out.update(compare_settings(params, startups))
    return out


def startup_figures(startups: List[float], prefix: str) -> Dict[str, float]:
    out = {f"{prefix}_first_s": startups[0]}
    if len(startups) > 1:
        out[f"{prefix}_later_s"] = statistics.median(startups[1:])
    return out


def compare_settings(params: StartupParams, startups: List[float]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    if params.num_workers > 0:
        other = epoch_startups(make_loader(params, params.num_workers, not params.persistent_workers),
                               len(startups))
        mine, theirs = ("persistent", "fresh") if params.persistent_workers else ("fresh", "persistent")
        for name, values in ((mine, startups), (theirs, other)):
            if len(values) > 1:
                out[f"startup_later_{name}_s"] = statistics.median(values[1:])
        in_process = epoch_startups(make_loader(params, 0, False), 1)[0]
        out["startup_no_workers_s"] = in_process
        out["worker_start_s"] = max(0.0, startups[0] - in_process)
    return out
