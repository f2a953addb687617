"""The shards and the loader that reads them (data.*, data.images.*, data.dali.*)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from sweeper.schema._base import _require

DATA_KINDS = ("tokens", "images")
LOADERS = ("torch", "dali")
DALI_EXECUTORS = ("dynamic", "pipelined", "serial")
DALI_DECODERS = ("cpu", "mixed")
MAX_WORKERS = 1024                       # loader processes or threads: past this, a typo, not a setting
SEED_END = 2 ** 32                       # numpy's legacy seeding takes 0 .. 2**32 - 1
TOKEN_END = 2 ** 31                      # synthetic tokens are int32: vocab_size at most this


@dataclass
class ImageConfig:
    # Synthetic JPEG shards (data.kind=images) and what each sample goes through, in either loader.
    height: int = 375                    # stored image size; 375 x 500 is a typical ImageNet photo
    width: int = 500
    quality: int = 90                    # JPEG quality: higher is bigger files and slower decoding
    crop_size: int = 224                 # random-resized-crop output, square
    augment: bool = True                 # false: decode only (no crop, no flip; images must share one size)

    def check(self) -> None:
        for name in ("height", "width", "crop_size"):
            _require(getattr(self, name) > 0, f"data.images.{name}", f"must be positive, got {getattr(self, name)}")
        _require(1 <= self.quality <= 100, "data.images.quality", f"must be between 1 and 100, got {self.quality}")


@dataclass
class DaliConfig:
    # NVIDIA DALI's own knobs (data.loader=dali; pip install 'sweeper[dali]'). docs/loaders.md says what each does.
    num_threads: int = 4                 # DALI's CPU worker threads
    prefetch_queue_depth: int = 2        # batches DALI prepares ahead
    executor: str = "dynamic"            # dynamic (DALI 2's default), pipelined (the older async, pipelined one), serial
    decoder: str = "cpu"                 # images: cpu, or mixed (nvJPEG on the GPU; needs a GPU trial)
    hw_decoder_load: float = 0.65        # mixed only: share of JPEGs sent to the hardware decoder (A100/H100/H200)
    random_shuffle: bool = False         # shuffle within a buffer of initial_fill samples (local, not global)
    initial_fill: int = 1024

    def check(self) -> None:
        for name in ("num_threads", "prefetch_queue_depth", "initial_fill"):
            _require(getattr(self, name) > 0, f"data.dali.{name}", f"must be positive, got {getattr(self, name)}")
        _require(self.num_threads <= MAX_WORKERS, "data.dali.num_threads",
                 f"{self.num_threads} threads is more than a node runs (at most {MAX_WORKERS}); "
                 f"use a number near the node's CPU count")
        _require(self.executor in DALI_EXECUTORS, "data.dali.executor",
                 f"must be one of {DALI_EXECUTORS}, got {self.executor!r}")
        _require(self.decoder in DALI_DECODERS, "data.dali.decoder",
                 f"must be one of {DALI_DECODERS}, got {self.decoder!r}")
        _require(0.0 <= self.hw_decoder_load <= 1.0, "data.dali.hw_decoder_load",
                 f"must be between 0 and 1, got {self.hw_decoder_load}")


@dataclass
class DataConfig:
    # Synthetic shards are made on first use unless `url` names the user's own.
    url: Optional[str] = None            # e.g. /data/train-{0000..0099}.tar
    cache_dir: str = "~/.cache/sweeper/shards"
    num_shards: int = 16
    samples_per_shard: int = 256
    seq_len: int = 1024                  # each sample holds seq_len + 1 int32 tokens
    vocab_size: int = 50257
    seed: int = 0
    # DataLoader knobs: the axes most sweeps vary.
    batch_size: int = 32
    num_workers: int = 0
    prefetch_factor: Optional[int] = None
    pin_memory: bool = False
    persistent_workers: bool = False
    shuffle_buffer: int = 0              # 0: read in shard order
    # What the shards hold and which loader reads them (docs/loaders.md).
    kind: str = "tokens"                 # tokens (int32 sequences) or images (JPEGs, decoded and augmented)
    loader: str = "torch"                # torch (the DataLoader above) or dali (NVIDIA DALI, its knobs under data.dali)
    images: ImageConfig = field(default_factory=ImageConfig)
    dali: DaliConfig = field(default_factory=DaliConfig)

    def check(self) -> None:
        _require(bool(str(self.cache_dir).strip()), "data.cache_dir",
                 "is empty (SWEEPER_CACHE set but empty?), so shards would land in the current folder; give a "
                 "folder, or unset SWEEPER_CACHE for ~/.cache/sweeper/shards")
        _require(self.kind in DATA_KINDS, "data.kind", f"must be one of {DATA_KINDS}, got {self.kind!r}")
        _require(self.loader in LOADERS, "data.loader", f"must be one of {LOADERS}, got {self.loader!r}")
        self.images.check()
        self.dali.check()
        for name in ("num_shards", "samples_per_shard", "seq_len", "vocab_size", "batch_size"):
            _require(getattr(self, name) > 0, f"data.{name}", f"must be positive, got {getattr(self, name)}")
        _require(self.num_workers >= 0, "data.num_workers", f"must be 0 or more, got {self.num_workers}")
        _require(0 <= self.seed < SEED_END, "data.seed", f"must be between 0 and 2**32 - 1, got {self.seed}")
        _require(self.vocab_size <= TOKEN_END, "data.vocab_size",
                 f"is {self.vocab_size}, but the shards hold int32 tokens: at most 2**31 ({TOKEN_END})")
        _require(self.num_workers <= MAX_WORKERS, "data.num_workers",
                 f"{self.num_workers} worker processes is more than a node runs (at most {MAX_WORKERS}); "
                 f"use a number near the node's CPU count")
        _require(self.shuffle_buffer >= 0, "data.shuffle_buffer", "must be 0 or more")
        if self.prefetch_factor is not None:
            _require(self.num_workers > 0, "data.prefetch_factor",
                     "only applies with data.num_workers > 0; set data.prefetch_factor=null for num_workers=0")
            _require(self.prefetch_factor > 0, "data.prefetch_factor", f"must be positive, got {self.prefetch_factor}")
        _require(not (self.persistent_workers and self.num_workers == 0), "data.persistent_workers",
                 "needs data.num_workers > 0")
