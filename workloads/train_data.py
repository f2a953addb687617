"""Token shards for the training step, one share per rank.

One rank reads through the dataloader workload's own `build_loader`. Several
ranks each read every world_size-th shard, split up front, so the same pipeline
runs without webdataset's `single_node_only` check (which refuses a multi-rank process).
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from workloads.dataloader import build_loader, shard_paths


def rank_loader(data, pin_memory: bool, rank: int, world_size: int) -> DataLoader:
    paths = shard_paths(data)
    if world_size == 1:
        return build_loader(data, paths, pin_memory)
    if len(paths) < world_size:
        raise ValueError(f"data.num_shards={len(paths)} is fewer than train.world_size={world_size}: "
                         f"each rank needs a shard of its own")
    return build_loader(data, paths[rank::world_size], pin_memory, nodesplitter=None)


