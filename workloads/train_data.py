"""Token shards for the training step, one share per rank.

One rank reads through the dataloader workload's own `build_loader`. Several
ranks each read every world_size-th shard: `build_loader` refuses a multi-rank
process (its webdataset pipeline has `single_node_only`), so for them the same
pipeline is built with the split done up front instead.
"""
from __future__ import annotations

from typing import List

import numpy as np
import torch
import webdataset as wds
from torch.utils.data import DataLoader

from workloads.dataloader import build_loader, shard_paths
from workloads.shards import SAMPLE_EXT


def rank_loader(data, pin_memory: bool, rank: int, world_size: int) -> DataLoader:
    paths = shard_paths(data)
    if world_size == 1:
        return build_loader(data, paths, pin_memory)
    if len(paths) < world_size:
        raise ValueError(f"data.num_shards={len(paths)} is fewer than train.world_size={world_size}: "
                         f"each rank needs a shard of its own")
    return _split_loader(data, paths[rank::world_size], pin_memory)


def _decode(sample) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(sample[SAMPLE_EXT], dtype="<i4").copy())


def _split_loader(data, paths: List[str], pin_memory: bool) -> DataLoader:
    dataset = wds.WebDataset(paths, shardshuffle=False, empty_check=False, nodesplitter=None)
    if data.shuffle_buffer:
        dataset = dataset.shuffle(data.shuffle_buffer)
    dataset = dataset.map(_decode)
    extra = {"prefetch_factor": data.prefetch_factor} if data.num_workers > 0 and data.prefetch_factor else {}
    return DataLoader(dataset, batch_size=data.batch_size, num_workers=data.num_workers,
                      pin_memory=pin_memory, persistent_workers=data.persistent_workers,
                      drop_last=True, **extra)
