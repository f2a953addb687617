"""The training-step workload's section (train.*)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from sweeper.schema._base import _is_import_path, _require
from sweeper.schema.data import MAX_WORKERS, DataConfig

TRAIN_PRESETS: Dict[str, Dict[str, int]] = {
    "tiny": {"n_layer": 2, "n_head": 4, "n_embd": 64, "seq_len": 64, "vocab_size": 512},
    "gpt2-124m": {"n_layer": 12, "n_head": 12, "n_embd": 768, "seq_len": 1024, "vocab_size": 50257},
}
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
ZERO_STAGES = (0, 1, 2, 3)
TRAIN_BACKENDS = ("native", "deepspeed")
DATA_SOURCES = ("synthetic", "shards")


@dataclass
class TrainConfig:
    # The training-step workload (workloads/train_step.py). The model's shape is the preset's,
    # except for any of n_layer, n_head, n_embd, seq_len, vocab_size set here.
    preset: str = "tiny"                 # tiny: seconds on a CPU; gpt2-124m: 12 x 768, 12 heads, T=1024
    n_layer: Optional[int] = None
    n_head: Optional[int] = None
    n_embd: Optional[int] = None
    seq_len: Optional[int] = None
    vocab_size: Optional[int] = None
    precision: str = "fp32"              # fp32, tf32, bf16 or fp16 (autocast; fp16 adds a GradScaler)
    micro_batch: int = 8                 # sequences per rank per forward pass
    accum_steps: int = 1                 # micro-batches per optimizer step
    compile: bool = False                # torch.compile
    fused_adamw: bool = True             # the fused AdamW kernel, where there is one (CUDA)
    zero_stage: int = 0                  # 0: DDP, 1: + ZeroRedundancyOptimizer, 2/3: FSDP2 (reshard after forward: no/yes)
    world_size: int = 1                  # ranks of one trial, on one node: GPUs, or CPU processes over gloo
    backend: str = "native"              # native (PyTorch) or deepspeed
    reduce_scatter: bool = True          # deepspeed only: zero_optimization.reduce_scatter
    contiguous_gradients: bool = True    # deepspeed only: zero_optimization.contiguous_gradients
    activation_checkpointing: bool = False
    data_source: str = "synthetic"       # synthetic: fixed random batches on the device; shards: data.* shards
    synthetic_batches: int = 8           # micro-batches in the synthetic pool, cycled (the model learns them)
    lr: float = 6e-4
    weight_decay: float = 0.1
    peak_flops: Optional[float] = None   # per device, for MFU; null: by GPU name (H100/H200: 989e12 dense bf16)
    phase_sync: bool = False             # GPU sync at each phase edge: only for a host-clock probe (the trial's
                                         # probe times GPU phases with CUDA events and needs none)
    dist_timeout_s: float = 300.0        # a collective stuck this long fails the trial
    # A user's own model and data (docs/train_step.md, "Your own model"); null: the preset's GPT and
    # the synthetic pool or the shards. Each is "package.module:name", imported in the trial.
    model: Optional[str] = None          # factory(train) -> torch.nn.Module, called as model(inputs, targets)
    batch: Optional[str] = None          # function(train, rank, world_size, seed) -> iterable of (inputs, targets)
    flops_per_token: Optional[float] = None  # training FLOPs a token, for MFU; null: 6 N + attention, estimated
    deepspeed_config: Optional[str] = None   # a DeepSpeed JSON as the base; the trial's axes override its fields

    def shape(self) -> Dict[str, int]:
        """The model's shape: the preset's, with any explicit value in its place."""
        preset = TRAIN_PRESETS.get(self.preset, {})
        return {k: getattr(self, k) if getattr(self, k) is not None else v for k, v in preset.items()}

    def check(self, data: Optional[DataConfig] = None) -> None:
        _require(self.preset in TRAIN_PRESETS, "train.preset",
                 f"must be one of {tuple(TRAIN_PRESETS)}, got {self.preset!r}")
        for name, value in self.shape().items():
            _require(value > 0, f"train.{name}", f"must be positive, got {value}")
        shape = self.shape()
        _require(shape["n_embd"] % shape["n_head"] == 0, "train.n_embd",
                 f"must be a multiple of train.n_head={shape['n_head']}, got {shape['n_embd']}")
        for name, choices in (("precision", PRECISIONS), ("zero_stage", ZERO_STAGES),
                              ("backend", TRAIN_BACKENDS), ("data_source", DATA_SOURCES)):
            _require(getattr(self, name) in choices, f"train.{name}",
                     f"must be one of {choices}, got {getattr(self, name)!r}")
        for name in ("micro_batch", "accum_steps", "world_size", "synthetic_batches", "lr", "dist_timeout_s"):
            _require(getattr(self, name) > 0, f"train.{name}", f"must be positive, got {getattr(self, name)}")
        _require(self.world_size <= MAX_WORKERS, "train.world_size",
                 f"{self.world_size} ranks is more than one node runs (at most {MAX_WORKERS}); give the node's "
                 f"GPU count, or a few CPU processes")
        _require(self.weight_decay >= 0, "train.weight_decay", "must be 0 or more")
        _require(self.peak_flops is None or self.peak_flops > 0, "train.peak_flops", "must be positive or null")
        _require(self.flops_per_token is None or self.flops_per_token > 0, "train.flops_per_token",
                 "must be positive or null (null: estimated as 6 N + attention from the model's parameters)")
        for name in ("model", "batch"):
            value = getattr(self, name)
            _require(value is None or _is_import_path(value), f"train.{name}",
                     f"must look like 'package.module:name', got {value!r}")
        _require(self.deepspeed_config is None or self.backend == "deepspeed", "train.deepspeed_config",
                 f"is a DeepSpeed config but train.backend={self.backend}; set train.backend=deepspeed")
        _require(self.batch is None or self.data_source == "synthetic", "train.batch",
                 f"makes the batches, so train.data_source={self.data_source} has no effect; leave it synthetic")
        if self.data_source == "shards" and data is not None:
            self._check_shards(data, shape)

    def _check_shards(self, data: DataConfig, shape: Dict[str, int]) -> None:
        _require(data.seq_len >= shape["seq_len"], "train.seq_len",
                 f"is {shape['seq_len']} but the shards hold data.seq_len={data.seq_len} tokens a sample; "
                 f"set data.seq_len to at least {shape['seq_len']}")
        _require(data.vocab_size <= shape["vocab_size"], "train.vocab_size",
                 f"is {shape['vocab_size']} but the shards use data.vocab_size={data.vocab_size}; "
                 f"set data.vocab_size={shape['vocab_size']} (synthetic shards) or train.vocab_size")
