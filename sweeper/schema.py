"""Typed config schemas: the one place where keys, defaults and checks live.

YAML under conf/ holds values; these dataclasses hold the shape. Hydra merges
the YAML onto them (so a typo fails with "Key 'x' not in 'DataConfig'"), and
`SweepConfig.from_dict` turns the resolved dict into checked objects once, at
the edge. Nothing here imports Hydra, Ray or torch: trial workers unpickle these.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from sweeper.errors import ConfigError

ISOLATION_MODES = ("node", "gpu", "pack")
DEVICES = ("auto", "cpu", "cuda")
ORDERS = ("interleaved", "grid")
EXECUTORS = ("ray", "local")
ON_OOM = ("record", "halve")
METRICS = ("throughput", "p50", "p95")
OBJECTIVES = ("throughput", "cost")
WANDB_MODES = ("offline", "online", "disabled")
PROFILES = ("none", "torch", "pyspy", "nsys")


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


DATA_KINDS = ("tokens", "images")
LOADERS = ("torch", "dali")
DALI_EXECUTORS = ("dynamic", "pipelined", "serial")
DALI_DECODERS = ("cpu", "mixed")


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
        _require(self.executor in DALI_EXECUTORS, "data.dali.executor",
                 f"must be one of {DALI_EXECUTORS}, got {self.executor!r}")
        _require(self.decoder in DALI_DECODERS, "data.dali.decoder",
                 f"must be one of {DALI_DECODERS}, got {self.decoder!r}")
        _require(0.0 <= self.hw_decoder_load <= 1.0, "data.dali.hw_decoder_load",
                 f"must be between 0 and 1, got {self.hw_decoder_load}")


def _is_import_path(value: Any) -> bool:
    """'package.module:name' with both parts non-empty."""
    module, sep, name = str(value).partition(":")
    return bool(sep and module.strip() and name.strip() and ":" not in name)


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
        _require(self.kind in DATA_KINDS, "data.kind", f"must be one of {DATA_KINDS}, got {self.kind!r}")
        _require(self.loader in LOADERS, "data.loader", f"must be one of {LOADERS}, got {self.loader!r}")
        self.images.check()
        self.dali.check()
        for name in ("num_shards", "samples_per_shard", "seq_len", "vocab_size", "batch_size"):
            _require(getattr(self, name) > 0, f"data.{name}", f"must be positive, got {getattr(self, name)}")
        _require(self.num_workers >= 0, "data.num_workers", f"must be 0 or more, got {self.num_workers}")
        _require(self.shuffle_buffer >= 0, "data.shuffle_buffer", "must be 0 or more")
        if self.prefetch_factor is not None:
            _require(self.num_workers > 0, "data.prefetch_factor",
                     "only applies with data.num_workers > 0; set data.prefetch_factor=null for num_workers=0")
            _require(self.prefetch_factor > 0, "data.prefetch_factor", f"must be positive, got {self.prefetch_factor}")
        _require(not (self.persistent_workers and self.num_workers == 0), "data.persistent_workers",
                 "needs data.num_workers > 0")


@dataclass
class WorkloadConfig:
    # `target` is "module:function"; the function gets (cfg, probe) and may return a dict of extra figures.
    target: str = "workloads.dataloader:run"
    spec: Optional[str] = None           # "module:NAME" of its WorkloadSpec; null: SPEC in the target's module, or the default
    steps: int = 100                     # measured steps, after warm-up
    warmup_steps: int = 10               # recorded, flagged, excluded from statistics
    device: str = "auto"                 # auto: cuda when the trial was given a GPU
    threads: Optional[int] = None        # torch threads; default: the CPUs Ray gave the trial
    seed: int = 0
    params: Dict[str, Any] = field(default_factory=dict)  # free-form, for user workloads

    def check(self) -> None:
        _require(":" in self.target, "workload.target", f"must look like 'package.module:function', got {self.target!r}")
        _require(self.steps > 0, "workload.steps", f"must be positive, got {self.steps}")
        _require(self.warmup_steps >= 0, "workload.warmup_steps", "must be 0 or more")
        _require(self.device in DEVICES, "workload.device", f"must be one of {DEVICES}, got {self.device!r}")
        _require(self.threads is None or self.threads > 0, "workload.threads", "must be positive")


@dataclass
class ResourcesConfig:
    # How trials share a machine: node = one trial per node at a time (loader sweeps),
    # gpu = one per GPU, pack = as many as their CPU and GPU requests allow.
    isolation: str = "node"
    gpus: Optional[float] = None         # None: 1 when the cluster has GPUs, else 0
    cpus: Optional[float] = None         # None: num_workers + 1, capped at one node's CPUs
    timeout_s: float = 1800.0            # wall-clock limit per trial
    memory_limit_gb: Optional[float] = None  # host address space a trial may add (RLIMIT_AS); None: no cap
    on_oom: str = "record"               # record: an "oom" row; halve: retry with half the (micro-)batch
    max_retries: int = 0                 # re-runs of a trial whose process or node died
    every_device: bool = False           # the fleet: each trial once on every GPU (GPU cells) or every node
                                         # (CPU cells) of the host or Ray cluster, pinned by Ray (docs/overnight.md)

    def check(self) -> None:
        _require(self.isolation in ISOLATION_MODES, "resources.isolation",
                 f"must be one of {ISOLATION_MODES}, got {self.isolation!r}")
        _require(self.gpus is None or self.gpus >= 0, "resources.gpus", "must be 0 or more")
        _require(self.cpus is None or self.cpus > 0, "resources.cpus", "must be positive")
        _require(self.timeout_s > 0, "resources.timeout_s", "must be positive")
        _require(self.memory_limit_gb is None or self.memory_limit_gb > 0, "resources.memory_limit_gb",
                 "must be positive or null")
        _require(self.on_oom in ON_OOM, "resources.on_oom", f"must be one of {ON_OOM}, got {self.on_oom!r}")
        _require(self.max_retries >= 0, "resources.max_retries", "must be 0 or more")


@dataclass
class AdaptiveConfig:
    # Adaptive repeats (BenchmarkDotNet's stopping rule): each cell runs min_repeats, then one
    # more at a time until the confidence interval of its throughput over repeats is within
    # rel_halfwidth of its mean, or it reaches max_repeats. Off: `repeats` fixed repeats.
    enabled: bool = False
    min_repeats: int = 3
    max_repeats: int = 10
    rel_halfwidth: float = 0.02          # half-width of the interval / mean: 0.02 = 2%
    confidence: float = 0.95

    def check(self) -> None:
        _require(self.min_repeats >= 2, "adaptive.min_repeats", f"must be 2 or more (an interval needs two), got {self.min_repeats}")
        _require(self.max_repeats >= self.min_repeats, "adaptive.max_repeats",
                 f"must be at least adaptive.min_repeats={self.min_repeats}, got {self.max_repeats}")
        _require(self.rel_halfwidth > 0, "adaptive.rel_halfwidth", f"must be positive (0.02 = 2%), got {self.rel_halfwidth}")
        _require(0 < self.confidence < 1, "adaptive.confidence", f"must be between 0 and 1, got {self.confidence}")


@dataclass
class OvernightConfig:
    # A suite of sweeps safe to start from cron or a systemd timer (sweeper/overnight.py, docs/overnight.md).
    sweeps: List[str] = field(default_factory=list)  # empty: an ordinary sweep; names: run each in turn
    budget_s: Optional[float] = None     # the night's length: past it nothing new starts; null: no limit
    lock_file: str = "~/.cache/sweeper/overnight.lock"  # one suite at a time per lock file (fcntl.flock)
    deadline: Optional[float] = None     # epoch seconds after which a sweep starts no trial (the suite sets it)
    alerts: Optional[str] = None         # the regression check, "module:function" (night folder, night.json dict)
                                         # -> list of alerts; any alert: exit 3. null: failures alone decide

    def check(self) -> None:
        _require(self.budget_s is None or self.budget_s > 0, "overnight.budget_s", f"must be positive or null, got {self.budget_s}")
        _require(bool(str(self.lock_file).strip()), "overnight.lock_file", "must be a path")
        _require(self.alerts is None or ":" in self.alerts, "overnight.alerts",
                 f"must look like 'package.module:function', got {self.alerts!r}")
        for name in self.sweeps:
            _require(isinstance(name, str) and name and name != "overnight", "overnight.sweeps",
                     f"must list sweep names (sweeper/conf/sweep/*.yaml) other than overnight, got {name!r}")


@dataclass
class RayConfig:
    address: Optional[str] = None        # None: start a local Ray; "auto" or "host:port": attach
    num_cpus: Optional[int] = None       # for a local Ray only
    num_gpus: Optional[int] = None       # for a local Ray only
    node_ip_address: Optional[str] = None  # this host's address as the cluster knows it (multi-homed hosts)
    runtime_env: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepMeta:
    name: str = "single"
    description: str = ""


@dataclass
class ConstraintsConfig:
    # Limits a recommended configuration must respect; null: no limit. A limit whose
    # figure the trials did not record is ignored, and the recommendation says so.
    max_gpu_mem_gb: Optional[float] = None   # peak GPU memory of a trial
    max_host_mem_gb: Optional[float] = None  # peak host memory (RSS) of a trial and its workers
    max_cpus: Optional[float] = None         # CPU cores the trial asked for

    def check(self) -> None:
        for name in ("max_gpu_mem_gb", "max_host_mem_gb", "max_cpus"):
            value = getattr(self, name)
            _require(value is None or value > 0, f"analysis.constraints.{name}",
                     f"must be positive or null, got {value}")


@dataclass
class AnalysisConfig:
    # How results are judged (sweeper/analysis): each cell against the baseline, over repeats.
    baseline: Optional[str] = None       # "data.num_workers=0 data.pin_memory=false"; null: nearest PyTorch defaults
    alpha: float = 0.05                  # significance level, after Holm across cells
    min_effect: float = 0.05             # smallest change worth a verdict: 0.05 = 5%
    metric: str = "throughput"           # what verdicts judge: throughput (items/s per repeat), p50 or p95
    heatmap: List[str] = field(default_factory=list)  # two dotted keys; empty: the first two swept axes
    constraints: ConstraintsConfig = field(default_factory=ConstraintsConfig)
    objective: str = "throughput"        # what the recommendation optimises: throughput (the metric's verdicts)
                                         # or cost (the fewest dollars per million tokens / samples; needs cost.*)
    max_memory_gb: Optional[float] = None  # peak memory limit on the workload's own memory (GPU or host), GB
    compare_within: List[str] = field(default_factory=list)  # dotted keys: cells are compared only with cells
                                         # of the same values of these keys (a stratum each, its own baseline);
                                         # a run over several workloads is always compared within `workload`

    def check(self) -> None:
        _require(self.objective in OBJECTIVES, "analysis.objective",
                 f"must be one of {OBJECTIVES}, got {self.objective!r}")
        _require(self.max_memory_gb is None or self.max_memory_gb > 0, "analysis.max_memory_gb",
                 f"must be positive or null, got {self.max_memory_gb}")
        for token in (self.baseline or "").split():
            _require("=" in token, "analysis.baseline",
                     f"must be space-separated key=value pairs, e.g. 'data.num_workers=0', got {self.baseline!r}")
        _require(0 < self.alpha < 1, "analysis.alpha", f"must be between 0 and 1, got {self.alpha}")
        _require(self.min_effect >= 0, "analysis.min_effect", f"must be 0 or more (0.05 = 5%), got {self.min_effect}")
        _require(self.metric in METRICS, "analysis.metric", f"must be one of {METRICS}, got {self.metric!r}")
        _require(isinstance(self.compare_within, (list, tuple)) and
                 all(isinstance(k, str) and ("." in k or k == "workload") for k in self.compare_within),
                 "analysis.compare_within", f"must be a list of dotted keys, e.g. [data.kind], got {self.compare_within!r}")
        _require(len(self.heatmap) in (0, 2), "analysis.heatmap",
                 f"must name two dotted keys, e.g. [data.num_workers,data.prefetch_factor], got {list(self.heatmap)}")
        self.constraints.check()


@dataclass
class CostConfig:
    # Prices that turn throughput into dollars (sweeper/analysis/cost.py, docs/analysis.md#cost).
    # A GPU trial costs its GPUs x the price of its GPU model (the fingerprint's gpu_name, matched
    # exactly, else by the key as a substring: {"H200": 3.5} prices "NVIDIA H200"); a CPU trial
    # costs the CPUs it asked for x cpu_hour_usd. Empty: no cost columns.
    gpu_hour_usd: Dict[str, float] = field(default_factory=dict)   # per GPU model, USD per GPU-hour
    cpu_hour_usd: Optional[float] = None                            # USD per CPU-core-hour, for CPU trials

    def check(self) -> None:
        for model, price in (self.gpu_hour_usd or {}).items():
            _require(isinstance(price, (int, float)) and price > 0, f"cost.gpu_hour_usd.{model}",
                     f"must be a positive price in USD per GPU-hour, got {price!r}")
        _require(self.cpu_hour_usd is None or self.cpu_hour_usd > 0, "cost.cpu_hour_usd",
                 f"must be a positive price in USD per CPU-hour, or null, got {self.cpu_hour_usd}")

    @property
    def enabled(self) -> bool:
        return bool(self.gpu_hour_usd) or self.cpu_hour_usd is not None


@dataclass
class WandbConfig:
    # One W&B run per trial plus a summary run. Offline by default: no account, no network;
    # `wandb sync <run>/wandb/offline-run-*` uploads later. Credentials come from the
    # environment (WANDB_API_KEY) and never belong here.
    enabled: bool = True                 # false: no W&B at all
    mode: str = "offline"                # offline, online or disabled
    project: str = "sweeper"
    entity: Optional[str] = None
    dir: Optional[str] = None            # null: <run folder>/wandb
    log_steps: bool = True               # log every measured step (false: only the summary)

    def check(self) -> None:
        _require(self.mode in WANDB_MODES, "wandb.mode", f"must be one of {WANDB_MODES}, got {self.mode!r}")
        _require(bool(self.project), "wandb.project", "must not be empty")


@dataclass
class MlflowConfig:
    # MLflow tracking: a parent run per sweep, a nested run per trial (sweeper/publishers/mlflow_sink.py).
    # An extra: pip install 'sweeper[mlflow]'. Credentials (MLFLOW_TRACKING_TOKEN, ...) stay in the environment.
    enabled: bool = False                # true: track this sweep in MLflow
    tracking_uri: Optional[str] = None   # null: sqlite:///<run folder>/mlflow.db (artifacts in <run folder>/mlruns);
                                         # or a server, e.g. http://mlflow.internal:5000
    experiment: str = "sweeper"

    def check(self) -> None:
        _require(bool(self.experiment), "mlflow.experiment", "must not be empty")
        _require(self.tracking_uri is None or bool(str(self.tracking_uri).strip()), "mlflow.tracking_uri",
                 "must be a URI such as http://host:5000 or sqlite:///path/mlflow.db, or null")
        if self.enabled:
            import importlib.util

            _require(importlib.util.find_spec("mlflow") is not None, "mlflow.enabled",
                     "is true but MLflow is not installed: pip install 'sweeper[mlflow]' (or mlflow.enabled=false)")


@dataclass
class ReportConfig:
    # report.html (self-contained) and report.md, written into the run folder when a sweep ends.
    enabled: bool = True


@dataclass
class HistoryConfig:
    # Every finished run is appended to a history store across nights (docs/history.md).
    enabled: bool = True                 # false: this run is not appended
    dir: Optional[str] = None            # null: <results_dir>/history, beside the runs it indexes
    alert_ratio: float = 1.15            # alert when a cell's items/s drops below its last good night / this,
                                         # or its p95 step time rises above the last good night x this
    step_threshold: float = 0.05         # asv step_detect: the smallest relative step it reports
    window: int = 60                     # the latest nights of each cell that the detection reads

    def check(self) -> None:
        _require(self.alert_ratio > 1, "history.alert_ratio", f"must be above 1 (e.g. 1.15), got {self.alert_ratio}")
        _require(0 <= self.step_threshold < 1, "history.step_threshold",
                 f"must be in [0, 1) (a relative step, e.g. 0.05), got {self.step_threshold}")
        _require(self.dir is None or bool(str(self.dir).strip()), "history.dir", "must be a folder, or null")
        _require(self.window >= 3, "history.window", f"must be 3 nights or more, got {self.window}")


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


@dataclass
class ProbeConfig:
    # What the probe measures in each trial; docs/measurement.md states each rule.
    sample_hz: float = 10.0              # utilisation sampler (CPU, NVML GPU, disk) per second; 0: off
    memory_every: int = 10               # host memory of the trial and its loader workers every N steps; 0: off
    settle: bool = False                 # warm-up ends once step time settles (never before workload.warmup_steps)
    settle_window: int = 10              # W: steps in each rolling median
    settle_tolerance: float = 0.05       # X: two consecutive windows' medians within this fraction = settled
    settle_max_steps: int = 200          # cap: warm-up ends here even if step time never settles
    growth_mb_per_100_steps: float = 10.0  # worker memory growing faster (with a good linear fit) is a warning
    profile: str = "none"                # none, torch (torch.profiler trace), pyspy (flame graph), nsys (NVTX marks)
    profile_wait: Optional[int] = None   # steps before the profiler warms up; null: workload.warmup_steps
    profile_warmup: int = 1
    profile_active: int = 5

    def check(self) -> None:
        _require(self.sample_hz == 0 or 1 <= self.sample_hz <= 1000, "probe.sample_hz",
                 f"must be 0 (off) or between 1 and 1000, got {self.sample_hz}")
        _require(self.memory_every >= 0, "probe.memory_every", f"must be 0 (off) or more, got {self.memory_every}")
        _require(self.settle_window >= 2, "probe.settle_window", f"must be 2 or more, got {self.settle_window}")
        _require(0 < self.settle_tolerance < 1, "probe.settle_tolerance",
                 f"must be a fraction between 0 and 1, got {self.settle_tolerance}")
        _require(self.settle_max_steps >= 2 * self.settle_window, "probe.settle_max_steps",
                 f"must be at least 2 x probe.settle_window={2 * self.settle_window}, got {self.settle_max_steps}")
        _require(self.growth_mb_per_100_steps > 0, "probe.growth_mb_per_100_steps", "must be positive")
        _require(self.profile in PROFILES, "probe.profile", f"must be one of {PROFILES}, got {self.profile!r}")
        _require(self.profile_wait is None or self.profile_wait >= 0, "probe.profile_wait", "must be 0 or more, or null")
        _require(self.profile_warmup >= 0, "probe.profile_warmup", "must be 0 or more")
        _require(self.profile_active >= 1, "probe.profile_active", f"must be 1 or more, got {self.profile_active}")


@dataclass
class TrialConfig:
    """What one trial receives: everything that shapes its measurement. A trial's own copy
    carries only the workload sections its spec names (the others are None)."""
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    data: Optional[DataConfig] = field(default_factory=DataConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    train: Optional[TrainConfig] = field(default_factory=TrainConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    def check(self) -> None:
        self.workload.check()
        if self.data is not None:
            self.data.check()
        self.resources.check()
        if self.train is not None:
            self.train.check(self.data)
        self.probe.check()


@dataclass
class RootConfig(TrialConfig):
    """The whole composed config (without `hydra`)."""
    sweep: SweepMeta = field(default_factory=SweepMeta)
    ray: RayConfig = field(default_factory=RayConfig)
    results_dir: str = "results"
    run_id: str = "???"
    dry_run: bool = False                # print the trial plan and launch nothing
    repeats: int = 1                     # runs per grid point, each in its own process
    order: str = "interleaved"           # interleaved: shuffled rounds, so drift is not an effect; grid: in order
    order_seed: int = 0
    resume: Optional[str] = None         # a run id under results/<sweep>/, or "latest": re-run only what is missing or failed
    executor: str = "ray"                # ray: trials as Ray tasks, each in a process of its own; local: one at a
                                         # time inside this process (for a debugger or a profiler; no timeouts)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    overnight: OvernightConfig = field(default_factory=OvernightConfig)

    def check(self) -> None:
        super().check()
        self.analysis.check()
        self.cost.check()
        _require(self.analysis.objective != "cost" or self.cost.enabled, "analysis.objective",
                 "is cost but no price is set: give cost.gpu_hour_usd (e.g. '+cost.gpu_hour_usd={H200:3.5}') "
                 "or cost.cpu_hour_usd")
        self.adaptive.check()
        self.overnight.check()
        self.wandb.check()
        self.mlflow.check()
        self.history.check()
        _require(self.repeats >= 1, "repeats", f"must be 1 or more, got {self.repeats}")
        _require(self.order in ORDERS, "order", f"must be one of {ORDERS}, got {self.order!r}")
        _require(self.executor in EXECUTORS, "executor", f"must be one of {EXECUTORS}, got {self.executor!r}")


def _build(cls, values: Dict[str, Any], prefix: str):
    """Dataclass from a plain dict, naming the dotted key of anything unknown."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        _require(key in known, f"{prefix}{key}", f"unknown key; valid keys: {sorted(known)}")
        sub = known[key].type
        sub_cls = _SECTIONS.get(sub.replace("Optional[", "").rstrip("]")) if isinstance(sub, str) else None
        kwargs[key] = _build(sub_cls, value or {}, f"{prefix}{key}.") if sub_cls else value
    return cls(**kwargs)


_SECTIONS = {
    "DataConfig": DataConfig, "ImageConfig": ImageConfig, "DaliConfig": DaliConfig, "WorkloadConfig": WorkloadConfig, "ResourcesConfig": ResourcesConfig,
    "RayConfig": RayConfig, "SweepMeta": SweepMeta,
    "AnalysisConfig": AnalysisConfig, "ConstraintsConfig": ConstraintsConfig, "WandbConfig": WandbConfig,
    "MlflowConfig": MlflowConfig, "CostConfig": CostConfig, "ReportConfig": ReportConfig, "HistoryConfig": HistoryConfig,
    "TrainConfig": TrainConfig, "ProbeConfig": ProbeConfig,
    "AdaptiveConfig": AdaptiveConfig, "OvernightConfig": OvernightConfig,
}

TRIAL_SECTIONS = ("workload", "data", "resources", "train", "probe")
CORE_SECTIONS = ("workload", "resources", "probe")     # every trial carries these


def trial_config_from_dict(values: Dict[str, Any]) -> TrialConfig:
    """Checked TrialConfig from a resolved dict; extra top-level keys are ignored."""
    picked = {k: values[k] for k in TRIAL_SECTIONS if k in values}
    cfg = _build(TrialConfig, picked, "")
    cfg.check()
    return cfg


def root_config_from_dict(values: Dict[str, Any]) -> RootConfig:
    values = {k: v for k, v in values.items() if k != "hydra"}
    cfg = _build(RootConfig, values, "")
    cfg.check()
    return cfg


def trial_dict(cfg: TrialConfig) -> Dict[str, Any]:
    """The trial's sections as plain dicts (a section it does not carry is left out)."""
    return {k: dataclasses.asdict(getattr(cfg, k)) for k in TRIAL_SECTIONS if getattr(cfg, k) is not None}


def trial_config(root: TrialConfig, sections: Sequence[str]) -> TrialConfig:
    """A trial's own config: the core sections and the workload sections its spec names."""
    kept = {k: copy.deepcopy(getattr(root, k)) for k in TRIAL_SECTIONS if k in CORE_SECTIONS or k in sections}
    return TrialConfig(**{k: kept.get(k) for k in TRIAL_SECTIONS})


def swept_value(cfg: TrialConfig, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    return node


__all__: List[str] = [
    "DataConfig", "ImageConfig", "DaliConfig", "WorkloadConfig", "ResourcesConfig", "RayConfig", "SweepMeta", "TrialConfig",
    "RootConfig", "AnalysisConfig", "CostConfig", "ConstraintsConfig", "WandbConfig", "MlflowConfig", "ReportConfig", "HistoryConfig",
    "TrainConfig", "ProbeConfig", "trial_config_from_dict", "root_config_from_dict", "trial_dict", "swept_value",
]
