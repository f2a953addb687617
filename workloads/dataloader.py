"""DataLoader workload: how fast do batches reach the trainer, through which loader?

Reads webdataset tar shards (synthetic ones, made on first use, or the user's own
`data.url`) holding token sequences (data.kind=tokens) or JPEGs (data.kind=images,
decoded, random-resized-cropped and flipped), through one of two loaders:

    data.loader=torch   torch.utils.data.DataLoader with num_workers, prefetch_factor,
                        pin_memory and persistent_workers
    data.loader=dali    an NVIDIA DALI pipeline (workloads/dali_loader.py, data.dali.*),
                        imported only here, inside the trial

and copies each batch to the GPU when the trial has one. Per step it times:

    data_wait   blocked waiting for the next batch: what the trainer would starve for
    h2d         host-to-device copy of the batch (GPU trials, unless DALI decoded on the GPU)

Defaults live in sweeper/schema/data.py (DataConfig, ImageConfig, DaliConfig); the ones that
matter most here: batch_size=32, seq_len=1024, 16 shards of 256 samples.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List

import numpy as np
import torch
import webdataset as wds
from torch.utils.data import DataLoader

from workloads.images import jpeg_to_array
from workloads.shards import IMAGE_EXT, SAMPLE_EXT, ensure_image_shards, ensure_synthetic_shards, expand_url
from workloads.specs import DATALOADER as SPEC  # noqa: F401  what the core knows of this workload


def shard_paths(data) -> List[str]:
    if data.url:
        paths = expand_url(data.url)
        if not paths:
            raise FileNotFoundError(f"data.url={data.url!r} matches no shard")
        return paths
    if data.kind == "images":
        im = data.images
        return ensure_image_shards(data.cache_dir, data.num_shards, data.samples_per_shard,
                                   im.height, im.width, im.quality, data.seed)
    return ensure_synthetic_shards(data.cache_dir, data.num_shards, data.samples_per_shard,
                                   data.seq_len, data.vocab_size, data.seed)


def _decode(sample: Dict[str, Any]) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(sample[SAMPLE_EXT], dtype="<i4").copy())


class _DecodeImage:
    """Picklable, so DataLoader workers get it under any start method."""

    def __init__(self, crop_size: int, augment: bool):
        self.crop_size, self.augment = crop_size, augment

    def __call__(self, sample: Dict[str, Any]) -> torch.Tensor:
        return torch.from_numpy(jpeg_to_array(sample[IMAGE_EXT], self.crop_size, self.augment))


def build_loader(data, paths: List[str], pin_memory: bool, nodesplitter=wds.single_node_only) -> DataLoader:
    """nodesplitter=None when the caller has already given each rank shards of its own."""
    dataset = wds.WebDataset(paths, shardshuffle=False, empty_check=False, nodesplitter=nodesplitter)
    if data.shuffle_buffer:
        dataset = dataset.shuffle(data.shuffle_buffer)
    decode = _DecodeImage(data.images.crop_size, data.images.augment) if data.kind == "images" else _decode
    dataset = dataset.map(decode)
    extra = {"prefetch_factor": data.prefetch_factor} if data.num_workers > 0 and data.prefetch_factor else {}
    return DataLoader(dataset, batch_size=data.batch_size, num_workers=data.num_workers,
                      pin_memory=pin_memory, persistent_workers=data.persistent_workers,
                      drop_last=True, **extra)


class TorchBatches:
    """next() gives the next batch, starting a new pass over the shards when one runs out."""

    def __init__(self, data, paths: List[str], pin_memory: bool):
        self.loader = build_loader(data, paths, pin_memory)
        self.iterator = iter(self.loader)
        self.epochs = 0

    def next(self) -> torch.Tensor:
        for _ in range(1000):
            try:
                return next(self.iterator)
            except StopIteration:
                self.epochs += 1
                self.iterator = iter(self.loader)
        raise RuntimeError("the shards hold fewer samples than one batch")

    def release(self) -> Dict[str, Any]:
        del self.iterator        # shuts down the loader's worker processes
        return {}


def open_batches(data, paths: List[str], device: torch.device, pin: bool):
    """The loader data.loader names; DALI is imported here, in the trial, never before."""
    if data.loader == "dali":
        from workloads.dali_loader import DaliBatches
        from workloads.shards import ensure_dali_indexes

        index_paths = ensure_dali_indexes(paths, data.cache_dir)   # once per shard set, before the clock
        device_id = (device.index or 0) if device.type == "cuda" else None   # None: DALI's CPU-only mode
        return lambda: DaliBatches(data, paths, index_paths, device_id)
    return lambda: TorchBatches(data, paths, pin)


def run(cfg, probe) -> Dict[str, Any]:
    data, device = cfg.data, torch.device(cfg.workload.device)
    on_gpu = device.type == "cuda"
    pin = data.pin_memory and on_gpu and data.loader == "torch"
    if data.pin_memory and not on_gpu:
        probe.warn("pin_memory=True has no effect without CUDA; recorded as not pinned")
    probe.set_figure("loader", data.loader)
    paths = shard_paths(data)
    start_loader = open_batches(data, paths, device, pin)
    started = time.perf_counter()
    batches = start_loader()
    while probe.more(cfg.workload.steps):     # warm-up (fixed, or until settled), then the measured steps
        with probe.step() as row:
            with probe.phase("data_wait"):
                batch = batches.next()
            if row["step"] == 0:
                probe.set_figure("time_to_first_batch_s", time.perf_counter() - started)
            if on_gpu and batch.device.type != "cuda":
                with probe.phase("h2d"):   # timed by CUDA events in the probe: no synchronize per step
                    batch = batch.to(device, non_blocking=pin)
            row["items"] = int(batch.shape[0])
    epochs = batches.epochs
    for name, value in batches.release().items():
        probe.set_figure(name, value)
    return {
        "pin_memory_effective": pin,
        "device": str(device),
        "num_shards": len(paths),
        "passes_over_data": epochs + 1,
        "sample_bytes": int(batch[0].numel() * batch.element_size()),
    }
