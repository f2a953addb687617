"""Specs and typed `workload.params` of the playbook's microbenchmarks (no torch here).

Each microbenchmark has one primary setting its steps measure (sweepable as an axis, e.g.
`workload=h2d_copy workload.params.size_mb=0.5,8,512 workload.params.pinned=true,false`)
and, with `compare: true`, times the alternatives briefly as trial figures, so one trial
of `+sweep=playbook` tells the whole story of its microbenchmark. A value of "auto" is
resolved in the trial from its device: real sizes on a GPU, small ones on a CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sweeper.errors import ConfigError
from sweeper.schema import TRAIN_PRESETS
from sweeper.spec import Pair, Wants, WorkloadSpec

AUTO = "auto"
# Model shapes besides the training presets: "small" is big enough (4.2M parameters, 17 MB
# fp32) that host memory readings on a CPU see its weights, small enough for seconds.
MODEL_PRESETS = {**TRAIN_PRESETS,
                 "small": {"n_layer": 4, "n_head": 4, "n_embd": 256, "seq_len": 128, "vocab_size": 4096}}
ACCESS_BACKENDS = ("arrow", "list", "numpy", "datasets")


def need(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"workload.params.{key}: {message}")


def positive_or_auto(value: Any, key: str) -> None:
    ok = value == AUTO or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)
    need(ok, key, f"must be a positive number or 'auto', got {value!r}")


def check_model(value: Any, key: str = "model") -> None:
    """A preset name, 'auto', or an import path 'package.module:factory' that can be found
    (checked without running it, as the training step's train.model is)."""
    from workloads.user_model import check_import_path

    ok = isinstance(value, str) and (value == AUTO or value in MODEL_PRESETS or ":" in value)
    need(ok, key, f"must be 'auto', a preset {sorted(MODEL_PRESETS)} or 'package.module:factory', got {value!r}")
    if value != AUTO and value not in MODEL_PRESETS:
        problem = check_import_path(value, f"workload.params.{key}")
        if problem:
            raise ConfigError(problem)


def by_device(value: Any, device: str, gpu: Any, cpu: Any) -> Any:
    """An 'auto' value as the trial's device decides: real sizes on a GPU, small ones on a CPU."""
    if value != AUTO:
        return value
    return gpu if device == "cuda" else cpu


# -- host-to-device copy ------------------------------------------------------------------
@dataclass
class CopyParams:
    size_mb: Any = AUTO       # MB (1e6 bytes) per copy; auto: 512 on a GPU, 8 on a CPU
    copies: Any = AUTO        # copies back to back per step; auto: enough to move 64 MB (8 on a CPU)
    pinned: bool = True       # page-locked source memory (CUDA only: a CPU has no pinned allocator)
    compare: bool = True      # also time the other memory kind: pinned_gbps, pageable_gbps, pinned_speedup
    overlap: bool = True      # a non_blocking copy against a running matmul: overlap_share

    def check(self) -> None:
        positive_or_auto(self.size_mb, "size_mb")
        need(self.copies == AUTO or (isinstance(self.copies, int) and not isinstance(self.copies, bool)
                                     and 0 < self.copies <= 4096),
             "copies", f"must be 'auto' or a whole number from 1 to 4096, got {self.copies!r}")
        need(self.size_mb == AUTO or self.size_mb <= 16384, "size_mb", "must be at most 16384 (16 GB)")
        for key in ("pinned", "compare", "overlap"):
            need(isinstance(getattr(self, key), bool), key, f"must be true or false, got {getattr(self, key)!r}")


# -- dataset random access ----------------------------------------------------------------
@dataclass
class AccessParams:
    rows: int = 1_000_000     # int64 values in the column
    accesses: int = 200       # random accesses per step
    backend: str = "arrow"    # what the steps measure: arrow, list, numpy, or datasets (when installed)
    compare: bool = True      # also time every other backend: access_ms_<backend>

    def check(self) -> None:
        need(isinstance(self.rows, int) and self.rows > 0, "rows", f"must be a positive integer, got {self.rows!r}")
        need(isinstance(self.accesses, int) and self.accesses > 0, "accesses",
             f"must be a positive integer, got {self.accesses!r}")
        need(self.backend in ACCESS_BACKENDS, "backend", f"must be one of {ACCESS_BACKENDS}, got {self.backend!r}")
        if self.backend == "datasets":
            import importlib.util

            need(importlib.util.find_spec("datasets") is not None, "backend",
                 "'datasets' needs the Hugging Face datasets package: pip install datasets")


# -- DataLoader start-up --------------------------------------------------------------------
@dataclass
class StartupParams:
    num_workers: int = 2
    persistent_workers: bool = True
    batch_size: int = 32
    batches: int = 4          # batches per epoch (one step is one epoch)
    sample_kb: int = 16       # bytes per sample, in KB
    compare: bool = True      # also the other persistent_workers and num_workers=0: worker_start_s

    def check(self) -> None:
        for key in ("batch_size", "batches", "sample_kb"):
            value = getattr(self, key)
            need(isinstance(value, int) and value > 0, key, f"must be a positive integer, got {value!r}")
        need(isinstance(self.num_workers, int) and self.num_workers >= 0, "num_workers", "must be 0 or more")
        need(not (self.persistent_workers and self.num_workers == 0), "persistent_workers",
             "needs workload.params.num_workers > 0")


# -- model forward timing -----------------------------------------------------------------
@dataclass
class ForwardParams:
    model: str = AUTO         # a preset (tiny, small, gpt2-124m) or 'package.module:factory'; auto: gpt2-124m / small
    batch: Any = AUTO         # the steps' batch; auto: 16 on a GPU, 4 on a CPU
    seq_len: Any = AUTO       # the steps' sequence length; auto: 1024 on a GPU, 64 on a CPU
    shapes: Any = AUTO        # [[batch, seq_len], ...] timed as figures forward_ms_b<B>_t<T>
    precision: str = "auto"   # fp32 or bf16 (autocast); auto: bf16 on a GPU, fp32 on a CPU
    vocab_size: Optional[int] = None   # token ids for a user's model (default: the preset's, else 512)
    options: dict = field(default_factory=dict)   # handed to a user's factory with the rest of this section

    def check(self) -> None:
        check_model(self.model)
        positive_or_auto(self.batch, "batch")
        positive_or_auto(self.seq_len, "seq_len")
        need(self.precision in (AUTO, "fp32", "bf16"), "precision", f"must be auto, fp32 or bf16, got {self.precision!r}")
        need(self.vocab_size is None or self.vocab_size > 0, "vocab_size", "must be positive")
        if self.shapes != AUTO:
            ok = isinstance(self.shapes, (list, tuple)) and all(
                isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(v, int) and v > 0 for v in s)
                for s in self.shapes)
            need(ok, "shapes", f"must be 'auto' or a list of [batch, seq_len] pairs, got {self.shapes!r}")


# -- allocator warm-up ----------------------------------------------------------------------
@dataclass
class AllocatorParams:
    model: str = AUTO         # as forward_timing; auto: gpt2-124m on a GPU, small on a CPU
    warmup: bool = True       # reserve the weights' bytes in one block before loading them
    batch: Any = AUTO         # the training steps after loading; auto: 16 on a GPU, 4 on a CPU
    seq_len: Any = AUTO       # auto: 1024 on a GPU, 64 on a CPU
    compare: bool = True      # also load the other way: figures *_warm and *_cold
    vocab_size: Optional[int] = None
    options: dict = field(default_factory=dict)

    def check(self) -> None:
        check_model(self.model)
        positive_or_auto(self.batch, "batch")
        positive_or_auto(self.seq_len, "seq_len")
        need(isinstance(self.warmup, bool), "warmup", f"must be true or false, got {self.warmup!r}")


def _one_gpu(cfg) -> Wants:
    return Wants(cpus=1.0, gpus=1.0)


def _host_only(cfg) -> Wants:
    return Wants(cpus=1.0, gpus=0.0)


def _loader_wants(cfg) -> Wants:
    """A loader with N workers keeps N + 1 processes busy."""
    return Wants(cpus=float(cfg.workload.params.get("num_workers", StartupParams.num_workers) + 1), gpus=0.0)


_PRELOAD = ("torch", "numpy")

H2D_COPY = WorkloadSpec(
    name="h2d_copy", target="workloads.playbook.h2d_copy:run", params=CopyParams, resources=_one_gpu,
    preload=_PRELOAD, items_label="MB",
    headline=(("copy_gbps", "GB/s", 1.0, 1), ("pinned_speedup", "pinned x", 1.0, 1),
              ("overlap_share", "overlap %", 100.0, 0)),
    pairs=(Pair("pinned", "pinned_gbps", "pageable", "pageable_gbps", "GB/s"),))
DATASET_ACCESS = WorkloadSpec(
    name="dataset_access", target="workloads.playbook.dataset_access:run", params=AccessParams,
    resources=_host_only, preload=_PRELOAD + ("pyarrow",), items_label="accesses",
    headline=(("access_ms_arrow", "arrow ms", 1.0, 5), ("access_ms_numpy", "numpy ms", 1.0, 5),
              ("access_ms_list", "list ms", 1.0, 5)),
    pairs=(Pair("arrow", "access_ms_arrow", "numpy", "access_ms_numpy", "time per access"),
           Pair("arrow", "access_ms_arrow", "list", "access_ms_list", "time per access")))
LOADER_STARTUP = WorkloadSpec(
    name="loader_startup", target="workloads.playbook.loader_startup:run", params=StartupParams,
    resources=_loader_wants, preload=_PRELOAD, items_label="batches",
    headline=(("startup_first_s", "first start s", 1.0, 3), ("startup_later_s", "later start s", 1.0, 3),
              ("worker_start_s", "workers s", 1.0, 3)),
    pairs=(Pair("fresh workers", "startup_later_fresh_s", "persistent workers", "startup_later_persistent_s",
                "start-up time of a later epoch"),))
FORWARD_TIMING = WorkloadSpec(
    name="forward_timing", target="workloads.playbook.forward_timing:run", params=ForwardParams,
    resources=_one_gpu, preload=_PRELOAD, items_label="tokens",
    headline=(("forward_ms", "forward ms", 1.0, 2), ("tokens_per_s", "tokens/s", 1.0, 0)),
    memory="",    # "": GPU memory when the trial had one, else host
    pairs=(Pair("largest shape", "tokens_per_s_largest", "smallest shape", "tokens_per_s_smallest", "tokens/s"),))
ALLOCATOR_WARMUP = WorkloadSpec(
    name="allocator_warmup", target="workloads.playbook.allocator_warmup:run", params=AllocatorParams,
    resources=_one_gpu, preload=_PRELOAD, items_label="tokens",
    headline=(("load_peak_mb", "load peak MB", 1.0, 0), ("load_peak_mb_cold", "cold", 1.0, 0),
              ("load_peak_mb_warm", "warm", 1.0, 0), ("step_peak_mb", "step peak MB", 1.0, 0)),
    memory="",    # "": GPU memory when the trial had one, else host
    pairs=(Pair("cold", "load_peak_mb_cold", "warm allocator", "load_peak_mb_warm", "load peak memory"),
           Pair("cold", "step_peak_mb_cold", "warm allocator", "step_peak_mb_warm", "first-step peak memory")))
