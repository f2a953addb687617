"""A plain NVIDIA DALI script, no sweeper: JPEGs from webdataset shards, decoded, random-resized-
cropped and flipped, batch after batch. What `python -m sweeper data.loader=dali data.kind=images`
must match on the same host (benchmarks/gpu_session.sh dali compares the two).

    python benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 3

Shards: the sweeper's synthetic JPEG shards (workloads/shards.py, numpy + Pillow only), so both
read the same files. Timing as the sweeper's: warm-up batches, then images per second over the
measured batches (the last one synchronised); also one first epoch, the reference's measure.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.base_iterator import LastBatchPolicy
from nvidia.dali.plugin.pytorch import DALIGenericIterator

from workloads.shards import ensure_dali_indexes, ensure_image_shards


def make_pipeline(args, paths, indexes):
    @pipeline_def(batch_size=args.batch, num_threads=args.threads, device_id=0 if args.decoder == "mixed" else None,
                  prefetch_queue_depth=2, seed=0, exec_dynamic=True)
    def pipeline():
        jpegs = fn.readers.webdataset(paths=paths, index_paths=indexes, ext=["jpg"], missing_component_behavior="error",
                                      seed=0, name="Reader")
        images = fn.decoders.image(jpegs, device=args.decoder, output_type=types.RGB)
        images = fn.random_resized_crop(images, size=[args.crop, args.crop])
        return fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))

    pipe = pipeline()
    pipe.build()
    return DALIGenericIterator([pipe], ["data"], reader_name="Reader", auto_reset=True,
                               last_batch_policy=LastBatchPolicy.DROP)


def batches(iterator):
    while True:
        try:
            yield next(iterator)[0]["data"]
        except StopIteration:
            continue


def one_run(args, paths, indexes):
    """(images/s over the measured batches, images/s of the first epoch), in a fresh pipeline."""
    it = batches(make_pipeline(args, paths, indexes))
    per_epoch = len(paths) * args.per_shard // args.batch
    t0 = time.perf_counter()
    for i in range(per_epoch):
        out = next(it)
    torch.cuda.synchronize() if out.is_cuda else None
    first_epoch = per_epoch * args.batch / (time.perf_counter() - t0)
    for _ in range(args.warmup):
        next(it)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        out = next(it)
    torch.cuda.synchronize() if out.is_cuda else None
    return args.steps * args.batch / (time.perf_counter() - t0), first_epoch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decoder", default="mixed", choices=("cpu", "mixed"))
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--per-shard", type=int, default=256)        # 8 x 256 = 2,048 JPEGs
    p.add_argument("--height", type=int, default=375)
    p.add_argument("--width", type=int, default=500)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    cache = os.environ.get("SWEEPER_CACHE", os.path.expanduser("~/.cache/sweeper/shards"))
    paths = ensure_image_shards(cache, args.shards, args.per_shard, args.height, args.width, args.quality, 0)
    indexes = ensure_dali_indexes(paths, cache)
    runs = [one_run(args, paths, indexes) for _ in range(args.repeats)]
    print(json.dumps({"images_per_s": statistics.median(r[0] for r in runs),
                      "first_epoch_images_per_s": statistics.median(r[1] for r in runs),
                      "runs": runs, "args": vars(args)}))


if __name__ == "__main__":
    main()
