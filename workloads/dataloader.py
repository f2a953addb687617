"""DataLoader workload: how fast do batches of token sequences reach the trainer?

Reads webdataset tar shards (synthetic ones, made on first use, or the user's
own `data.url`) through torch.utils.data.DataLoader with the trial's
num_workers, prefetch_factor, pin_memory and persistent_workers, and copies each
batch to the GPU when the trial has one. Per step it times:

    data_wait   blocked in next(iterator): what the trainer would starve for
    h2d         host-to-device copy of the batch (GPU trials only)

Defaults live in sweeper/schema.py (DataConfig, WorkloadConfig); the ones that
matter most here: batch_size=32, seq_len=1024, 16 shards of 256 samples.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List

import numpy as np
import torch
import webdataset as wds
from torch.utils.data import DataLoader

from workloads.shards import SAMPLE_EXT, ensure_synthetic_shards, expand_url
from workloads.specs import DATALOADER as SPEC  # noqa: F401  what the core knows of this workload


def shard_paths(data) -> List[str]:
    if data.url:
        paths = expand_url(data.url)
        if not paths:
            raise FileNotFoundError(f"data.url={data.url!r} matches no shard")
        return paths
    return ensure_synthetic_shards(data.cache_dir, data.num_shards, data.samples_per_shard,
                                   data.seq_len, data.vocab_size, data.seed)


def _decode(sample: Dict[str, Any]) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(sample[SAMPLE_EXT], dtype="<i4").copy())


def build_loader(data, paths: List[str], pin_memory: bool, nodesplitter=wds.single_node_only) -> DataLoader:
    """nodesplitter=None when the caller has already given each rank shards of its own."""
    dataset = wds.WebDataset(paths, shardshuffle=False, empty_check=False, nodesplitter=nodesplitter)
    if data.shuffle_buffer:
        dataset = dataset.shuffle(data.shuffle_buffer)
    dataset = dataset.map(_decode)
    extra = {"prefetch_factor": data.prefetch_factor} if data.num_workers > 0 and data.prefetch_factor else {}
    return DataLoader(dataset, batch_size=data.batch_size, num_workers=data.num_workers,
                      pin_memory=pin_memory, persistent_workers=data.persistent_workers,
                      drop_last=True, **extra)


def _next_batch(loader: DataLoader, state: Dict[str, Any]) -> torch.Tensor:
    """Next batch, starting a new pass over the shards when one runs out."""
    while True:
        try:
            return next(state["it"])
        except StopIteration:
            state["epochs"] += 1
            if state["epochs"] > 1000:
                raise RuntimeError("the shards hold fewer samples than one batch")
            state["it"] = iter(loader)


def run(cfg, probe) -> Dict[str, Any]:
    data, device = cfg.data, torch.device(cfg.workload.device)
    on_gpu = device.type == "cuda"
    pin = data.pin_memory and on_gpu
    if data.pin_memory and not on_gpu:
        probe.warn("pin_memory=True has no effect without CUDA; recorded as not pinned")
    paths = shard_paths(data)
    loader = build_loader(data, paths, pin)
    started = time.perf_counter()
    state = {"it": iter(loader), "epochs": 0}
    while probe.more(cfg.workload.steps):     # warm-up (fixed, or until settled), then the measured steps
        with probe.step() as row:
            with probe.phase("data_wait"):
                batch = _next_batch(loader, state)
            if row["step"] == 0:
                probe.set_figure("time_to_first_batch_s", time.perf_counter() - started)
            if on_gpu:
                with probe.phase("h2d"):   # timed by CUDA events in the probe: no synchronize per step
                    batch = batch.to(device, non_blocking=pin)
            row["items"] = int(batch.shape[0])
    del state["it"]   # shuts down the loader's worker processes
    return {
        "pin_memory_effective": pin,
        "device": str(device),
        "num_shards": len(paths),
        "passes_over_data": state["epochs"] + 1,
        "sample_bytes": (data.seq_len + 1) * 4,
    }
