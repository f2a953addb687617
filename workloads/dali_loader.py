"""NVIDIA DALI reading the same webdataset shards as the DataLoader (data.loader=dali).

Imported only inside a trial that asked for DALI, never by the zygote that forks trials:
DALI may start CUDA, and a process that has must not fork. On a CPU trial the pipeline
has `device_id=None` (DALI's CPU-only mode, which needs no GPU and no driver).

    tokens   fn.readers.webdataset -> int32 sequences
    images   fn.readers.webdataset -> fn.decoders.image (cpu or mixed) -> random-resized-crop -> flip

Readers are endless: the iterator is given `reader_name` so one pass over the shards is
an epoch, and `random_shuffle` shuffles only within a buffer of `initial_fill` samples.
"""
from __future__ import annotations

import gc
from typing import Any, Dict, List, Optional

import psutil
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.base_iterator import LastBatchPolicy
from nvidia.dali.plugin.pytorch import DALIGenericIterator

from workloads.shards import IMAGE_EXT, SAMPLE_EXT

READER = "Reader"
RSS_EVERY = 16          # batches between two readings of the process's RSS (DALI's pools grow, then hold)
# data.dali.executor -> the Pipeline's executor arguments
EXECUTORS: Dict[str, Dict[str, bool]] = {
    "dynamic": {"exec_dynamic": True},
    "pipelined": {"exec_dynamic": False, "exec_pipelined": True, "exec_async": True},
    "serial": {"exec_dynamic": False, "exec_pipelined": False, "exec_async": False},
}


def _read(data, paths: List[str], index_paths: List[str], ext: str, dtype=None):
    extra = {"dtypes": [dtype]} if dtype is not None else {}
    return fn.readers.webdataset(
        paths=paths, index_paths=index_paths, ext=[ext], missing_component_behavior="error",
        random_shuffle=data.dali.random_shuffle, initial_fill=data.dali.initial_fill, seed=data.seed,
        name=READER, **extra)


def _images(data, jpegs):
    decoder = "mixed" if data.dali.decoder == "mixed" else "cpu"
    extra = {"hw_decoder_load": data.dali.hw_decoder_load} if decoder == "mixed" else {}
    images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB, **extra)
    if not data.images.augment:
        return images
    size = data.images.crop_size
    images = fn.random_resized_crop(images, size=[size, size])
    return fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))


def build_pipeline(data, paths: List[str], index_paths: List[str], device_id: Optional[int]):
    """The pipeline for data.kind; device_id None: CPU only (mixed decoding then refuses)."""
    if data.kind == "images" and data.dali.decoder == "mixed" and device_id is None:
        raise RuntimeError("data.dali.decoder=mixed decodes on the GPU, and this trial has none; "
                           "use data.dali.decoder=cpu or give the trial a GPU")

    @pipeline_def(batch_size=data.batch_size, num_threads=data.dali.num_threads, device_id=device_id,
                  prefetch_queue_depth=data.dali.prefetch_queue_depth, seed=data.seed,
                  **EXECUTORS[data.dali.executor])
    def pipeline():
        if data.kind == "images":
            return _images(data, _read(data, paths, index_paths, IMAGE_EXT))
        return _read(data, paths, index_paths, SAMPLE_EXT, types.INT32)

    pipe = pipeline()
    pipe.build()
    return pipe


def build_iterator(pipe) -> DALIGenericIterator:
    """One epoch per pass over the shards (reader_name); full batches only, like drop_last."""
    return DALIGenericIterator([pipe], ["data"], reader_name=READER, auto_reset=True,
                               last_batch_policy=LastBatchPolicy.DROP)


class DaliBatches:
    """next() gives the next batch as a torch tensor, starting a new epoch when one ends,
    and follows the process' RSS while the pipeline lives (DALI's pools keep memory)."""

    def __init__(self, data, paths: List[str], index_paths: List[str], device_id: Optional[int]):
        self.process = psutil.Process()
        self.pipe = build_pipeline(data, paths, index_paths, device_id)
        self.iterator = build_iterator(self.pipe)
        self.epochs = self.batches = 0
        self.peak_rss = self.process.memory_info().rss

    def next(self):
        for _ in range(1000):
            try:
                batch = next(self.iterator)[0]["data"]
                self.batches += 1
                if self.batches % RSS_EVERY == 0:     # a reading costs ~40 us: 1% of a 4 ms step
                    self.peak_rss = max(self.peak_rss, self.process.memory_info().rss)
                return batch
            except StopIteration:        # auto_reset: the next call starts the next epoch
                self.epochs += 1
        raise RuntimeError("the shards hold fewer samples than one batch")

    def release(self) -> Dict[str, Any]:
        """Delete the iterator and pipeline; the figures the memory warning reads."""
        self.peak_rss = max(self.peak_rss, self.process.memory_info().rss)
        del self.iterator, self.pipe
        gc.collect()
        mb = 1024 * 1024
        return {"dali_mem_peak_mb": self.peak_rss / mb,
                "dali_mem_after_release_mb": self.process.memory_info().rss / mb}
