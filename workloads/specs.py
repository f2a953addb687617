"""The shipped workloads' specs (sweeper/spec.py says what a spec declares).

Apart from the workload modules so that planning, a dry run and the views never
import torch: conf/workload/<name>.yaml names the spec with `spec:`.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional

from sweeper.errors import ConfigError
from sweeper.spec import NoParams, WorkloadSpec, Wants
from workloads.deepspeed_config import cpu_flags, fp16_refused_on_cpu, load_json, resolve
from workloads.user_model import check_import_path

# What a trial of either workload imports anyway; none of it starts CUDA.
_COMMON_PRELOAD = ("torch", "numpy", "webdataset")


# -- the DataLoader ------------------------------------------------------------------
def loader_wants(cfg) -> Wants:
    """A loader with N workers (DataLoader) or N threads (DALI) keeps N + 1 cores busy."""
    helpers = cfg.data.dali.num_threads if cfg.data.loader == "dali" else cfg.data.num_workers
    return Wants(cpus=float(helpers + 1), gpus=1.0)


def halve_loader_batch(cfg) -> Optional[Dict[str, Any]]:
    return {"data.batch_size": cfg.data.batch_size // 2} if cfg.data.batch_size > 1 else None


@functools.lru_cache(maxsize=None)
def _shard_problem(url: str, cache_dir: str, batch_size: int) -> Optional[str]:
    from workloads.shards import check_local_shards

    return check_local_shards(url, cache_dir, batch_size)


def check_shards(cfg, batch_size: int = 1) -> None:
    """Shards that are missing, unreadable, not tar files, cut, garbled, empty or together
    smaller than one batch fail here, not in a worker: the user's (data.url), and a synthetic
    set an earlier run made, each walked whole."""
    url = cfg.data.url
    if url and "://" not in url and not url.startswith("pipe:"):
        problem = _shard_problem(url, cfg.data.cache_dir, batch_size)
        if problem:
            raise ConfigError(f"data.url={url!r}: {problem}")
    elif not url:
        check_synthetic_size(cfg.data, batch_size)
        from workloads.shards import check_synthetic_shards

        problem = check_synthetic_shards(cfg.data)
        if problem:
            raise ConfigError(problem)


def check_synthetic_size(data, batch_size: int) -> None:
    held = data.num_shards * data.samples_per_shard
    if held < batch_size:
        raise ConfigError(f"data.batch_size: {batch_size} is more than the synthetic shards hold (data.num_shards x "
                          f"data.samples_per_shard = {held}); lower it, or raise data.samples_per_shard")


DALI_INSTALL = "pip install 'sweeper[dali]' (from a checkout: pip install -e '.[dali]')"


def check_dali_installed(cfg) -> None:
    """data.loader=dali without DALI fails at plan time; find_spec, so the driver never imports DALI."""
    import importlib.util

    try:
        found = importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):    # no `nvidia` namespace package at all
        found = False
    if cfg.data.loader == "dali" and not found:
        raise ConfigError(f"data.loader=dali: NVIDIA DALI is not installed; {DALI_INSTALL}, or data.loader=torch")


def check_loader(cfg) -> None:
    check_shards(cfg, cfg.data.batch_size)
    check_dali_installed(cfg)


def check_loader_device(cfg, device: str) -> None:
    """DALI's mixed JPEG decoding for a trial the plan gives no GPU: refused now, not in each trial."""
    data = cfg.data
    if (data.loader, data.kind, data.dali.decoder) == ("dali", "images", "mixed") and device != "cuda":
        raise ConfigError("data.dali.decoder=mixed: decodes on the GPU, and these trials get none; use "
                          "data.dali.decoder=cpu, or give them a GPU (resources.gpus=1 on a machine with one)")


DATALOADER = WorkloadSpec(
    name="dataloader", target="workloads.dataloader:run", sections=("data",), params=NoParams, check=check_loader,
    check_device=check_loader_device, resources=loader_wants,
    # never DALI here: it may start CUDA, and the zygote forks every trial
    preload=_COMMON_PRELOAD + ("PIL.Image", "workloads.dataloader"), shrink=halve_loader_batch, items_label="samples",
    headline=(("time_to_first_batch_s", "first batch s", 1.0, 3),), memory="host_mem_gb")


# -- the training step ---------------------------------------------------------------
def step_wants(cfg) -> Wants:
    """One GPU per rank; on CPUs each rank keeps its loader workers and itself busy."""
    ranks = cfg.train.world_size
    return Wants(cpus=float((cfg.data.num_workers + 1) * ranks), gpus=float(ranks))


def halve_micro_batch(cfg) -> Optional[Dict[str, Any]]:
    """Half the micro-batch and twice the accumulation (as accelerate's find_executable_batch_size)."""
    train = cfg.train
    if train.micro_batch <= 1:
        return None
    return {"train.micro_batch": train.micro_batch // 2, "train.accum_steps": train.accum_steps * 2}


def check_step(cfg) -> None:
    train = cfg.train
    if train.data_source == "shards":
        check_shards(cfg)
        if (cfg.data.loader, cfg.data.kind) != ("torch", "tokens"):
            raise ConfigError(f"data.loader={cfg.data.loader} data.kind={cfg.data.kind}: the training step reads "
                              f"token shards with the torch loader only; set data.loader=torch data.kind=tokens")
    for key in ("model", "batch"):                 # found without importing them (or torch)
        if getattr(train, key):
            problem = check_import_path(getattr(train, key), f"train.{key}")
            if problem:
                raise ConfigError(problem)
    if train.deepspeed_config:
        check_deepspeed_json(cfg)


def check_deepspeed_json(cfg) -> None:
    """The user's DeepSpeed JSON as this trial would run it: every contradiction, one line each."""
    train = cfg.train
    key = f"train.deepspeed_config={train.deepspeed_config!r}"
    try:
        user = load_json(train.deepspeed_config)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    steps = cfg.workload.warmup_steps + cfg.workload.steps
    resolved = resolve(train, train.world_size, user, train.shape()["n_embd"], cfg.workload.warmup_steps, steps)
    if resolved.problems:
        raise ConfigError("\n".join(f"{key}: {p}" for p in resolved.problems))


def check_step_device(cfg, device: str) -> None:
    """fp16 through DeepSpeed on CPUs: its CPU accelerator refuses it unless oneDNN has fp16
    (this machine's CPU flags stand for the workers')."""
    train = cfg.train
    if train.backend == "deepspeed" and train.precision == "fp16" and device == "cpu" \
            and fp16_refused_on_cpu(cpu_flags()):
        source = f" (train.deepspeed_config={train.deepspeed_config!r} asks for it too)" if train.deepspeed_config else ""
        raise ConfigError(f"train.precision=fp16: DeepSpeed's CPU accelerator refuses fp16 here (is_fp16_supported() "
                          f"is false: this CPU has no AVX512-FP16 or AMX-FP16) and these trials run on CPUs{source}; "
                          f"use train.precision=bf16 or fp32, or GPUs")


TRAIN_STEP = WorkloadSpec(
    name="train_step", target="workloads.train_step:run", sections=("train", "data"), params=NoParams, check=check_step,
    check_device=check_step_device, resources=step_wants,
    preload=_COMMON_PRELOAD + ("workloads.train_step",), shrink=halve_micro_batch, items_label="samples",
    headline=(("tokens_per_s", "tokens/s", 1.0, 0), ("mfu", "MFU %", 100.0, 1),
              ("loss_final", "loss", 1.0, 4)),
    memory="gpu_mem_gb")
