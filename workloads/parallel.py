"""Model, optimizer and ZeRO stage for one rank: what `train.zero_stage` and `train.backend` mean.

    native   0: DDP                       every rank holds all parameters, gradients, optimizer state
             1: DDP + ZeroRedundancyOptimizer   optimizer state sharded; parameters broadcast after the step
             2: FSDP2 fully_shard(reshard_after_forward=False)   + gradients sharded (reduce-scatter)
             3: FSDP2 fully_shard(reshard_after_forward=True)    + parameters sharded between uses
    deepspeed   deepspeed.initialize with zero_optimization.stage = train.zero_stage

The model is the preset's GPT or the user's (`train.model`, workloads/user_model.py); its blocks
(the first nn.ModuleList) are what activation checkpointing wraps and FSDP2 shards one by one.
DeepSpeed's config is the engine's own or the user's JSON resolved (workloads/deepspeed_config.py).
A single rank without a process group trains the bare model. An engine has three
calls, `forward(x, y) -> loss`, `backward(loss, last)`, `step()`, so the training
loop is the same for every stage and backend. With accumulation, gradients are
synchronised only on the last micro-batch (DDP no_sync, FSDP2 set_requires_gradient_sync).
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn

from workloads.deepspeed_config import engine_config as deepspeed_config  # noqa: F401  (tests, docs name it here)
from workloads.distributed import RankContext
from workloads.model import GPT, Checkpointed, ModelShape, checkpoint_blocks, torch_checkpoint
from workloads.user_model import build_user_model, find_blocks, loss_of

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def require_deepspeed(device_type: str):
    """Imports DeepSpeed for a trial on device_type. DeepSpeed picks its accelerator once, at
    import: name it (DS_ACCELERATOR, unless set already) so that a CPU trial gets the CPU one,
    whose collectives fall back to gloo where oneCCL is not installed."""
    os.environ.setdefault("DS_ACCELERATOR", device_type)
    try:
        import deepspeed
    except ImportError as exc:
        raise RuntimeError(f"train.backend=deepspeed needs DeepSpeed, which this trial cannot import ({exc}); "
                           f"pip install deepspeed on the workers, or use train.backend=native") from None
    return deepspeed


def build(train, shape: ModelShape, ctx: RankContext, ds_config: Optional[Dict[str, Any]] = None):
    if train.backend == "deepspeed":
        return DeepSpeedEngine(train, shape, ctx, ds_config)
    return NativeEngine(train, shape, ctx)


def make_model(train, shape: ModelShape, checkpoint_fn=None) -> nn.Module:
    """The preset's GPT, or the user's (train.model); with a checkpoint function, each block
    (the first nn.ModuleList: workloads/user_model.py) recomputes its activations in backward."""
    model = build_user_model(train) if train.model else GPT(shape)
    if checkpoint_fn is not None:
        blocks = find_blocks(model)
        if blocks is None:
            raise RuntimeError(f"train.activation_checkpointing=true but train.model={train.model!r} has no "
                               f"nn.ModuleList of blocks to checkpoint")
        checkpoint_blocks(blocks, checkpoint_fn)
    return model


def model_notes(model: nn.Module) -> Dict[str, Any]:
    """Parameters counted once (tied weights once), before any sharding; the blocks found and
    how many of them recompute their activations."""
    blocks = find_blocks(model)
    return {"n_params_counted": sum(p.numel() for p in model.parameters()),
            "n_blocks": len(blocks) if blocks is not None else 0,
            "checkpointed_blocks": sum(isinstance(m, Checkpointed) for m in model.modules())}


def wrap_notes(model: nn.Module, sync_mode: str, train) -> Dict[str, Any]:
    """How the model was wrapped for its ZeRO stage, counted from the wrapped model itself."""
    from torch.distributed.fsdp import FSDPModule

    units = sum(isinstance(m, FSDPModule) for m in model.modules())
    name = {"none": "bare", "ddp": "ddp+zero1" if train.zero_stage == 1 else "ddp"}.get(sync_mode, "fsdp2")
    return {"parallel": name, "fsdp_units": units}


def param_groups(model: nn.Module, weight_decay: float) -> List[Dict[str, Any]]:
    """Weight decay on matrices and embeddings, none on biases and norms (as nanoGPT)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def adamw_kwargs(train, device: torch.device) -> Dict[str, Any]:
    fused = bool(train.fused_adamw and device.type == "cuda")
    return {"lr": train.lr, "betas": (0.9, 0.95), "eps": 1e-8, **({"fused": True} if fused else {})}


class NativeEngine:
    def __init__(self, train, shape: ModelShape, ctx: RankContext):
        self.accum = train.accum_steps
        model = make_model(train, shape, torch_checkpoint if train.activation_checkpointing else None)
        model = model.to(ctx.device)
        counted = model_notes(model)
        self.model, self.sync_mode = self._wrap(model, train, ctx)
        groups = param_groups(self.model, train.weight_decay)
        kwargs = adamw_kwargs(train, ctx.device)
        if ctx.distributed and train.zero_stage == 1:
            from torch.distributed.optim import ZeroRedundancyOptimizer

            self.optimizer = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, **kwargs)
        else:
            self.optimizer = torch.optim.AdamW(groups, **kwargs)
        self.scaler = self._scaler(train, ctx)
        dtype = AMP_DTYPES.get(train.precision)
        self.autocast = (lambda: torch.autocast(ctx.device.type, dtype=dtype)) if dtype else contextlib.nullcontext
        self.notes = {"fused_adamw_effective": "fused" in kwargs, "grad_scaler": self.scaler.is_enabled(), **counted,
                      **wrap_notes(self.model, self.sync_mode, train)}

    @staticmethod
    def _wrap(model: nn.Module, train, ctx: RankContext):
        """(module to call, how gradients are kept from syncing): bare, DDP or FSDP2."""
        if not ctx.distributed or train.zero_stage in (0, 1):
            if train.compile:
                model = torch.compile(model)
            if not ctx.distributed:
                return model, "none"
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            return DDP(model, device_ids=ids), "ddp"
        return shard(model, train), "fsdp"

    @staticmethod
    def _scaler(train, ctx: RankContext):
        fp16 = train.precision == "fp16"
        if fp16 and ctx.distributed and train.zero_stage >= 2:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            return ShardedGradScaler(device=ctx.device.type)   # agrees on inf/NaN across the shards
        return torch.amp.GradScaler(ctx.device.type, enabled=fp16)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            return loss_of(self.model(x, y))

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        with self._grad_sync(last):
            self.scaler.scale(loss / self.accum if self.accum > 1 else loss).backward()

    def _grad_sync(self, last: bool):
        if self.sync_mode == "ddp" and not last:
            return self.model.no_sync()
        if self.sync_mode == "fsdp" and self.accum > 1:    # a walk over every module: skip it when always True
            self.model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


def shard(model: nn.Module, train) -> nn.Module:
    """FSDP2: each block its own unit, then the root (embeddings, tied head, final norm).
    Stage 2 keeps parameters gathered from forward to backward; stage 3 frees them after
    each block's forward and gathers them again for its backward. A user's model without
    an nn.ModuleList of blocks is one unit (compiled whole)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dtype = AMP_DTYPES.get(train.precision)
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()
    reshard = train.zero_stage == 3
    blocks = find_blocks(model)
    for block in blocks if blocks is not None else ():
        if train.compile:
            block.compile()
        fully_shard(block, reshard_after_forward=reshard, mp_policy=policy)
    if blocks is None and train.compile:
        model.compile()
    return fully_shard(model, reshard_after_forward=reshard, mp_policy=policy)


# -- DeepSpeed ----------------------------------------------------------------------
def join_process_group(deepspeed, ctx: RankContext) -> None:
    """DeepSpeed adopts the trial's process group (gloo on CPUs, NCCL on GPUs) rather than
    starting its own: it reads the rank from the environment and wraps torch.distributed.
    On CPUs it would first JIT-compile its shared-memory collectives (a C++ op, ~60 s of g++),
    which only its inference all-reduce uses; marking the op unavailable keeps every
    collective on gloo and needs no compiler."""
    os.environ.update({"RANK": str(ctx.rank), "LOCAL_RANK": str(ctx.rank), "WORLD_SIZE": str(ctx.world_size),
                       "LOCAL_WORLD_SIZE": str(ctx.world_size)})
    if ctx.device.type == "cpu":
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend=torch.distributed.get_backend(), dist_init_required=False)


class DeepSpeedEngine:
    """DeepSpeed owns loss scaling, accumulation and the ZeRO stage; `engine.step()` runs
    after every micro-batch and updates the weights only at the accumulation boundary."""

    def __init__(self, train, shape: ModelShape, ctx: RankContext, config: Optional[Dict[str, Any]] = None):
        deepspeed = require_deepspeed(ctx.device.type)
        join_process_group(deepspeed, ctx)
        config = config if config is not None else deepspeed_config(train, ctx.world_size)
        checkpoint_fn = None
        if train.activation_checkpointing:          # reads the world size: after join_process_group
            deepspeed.checkpointing.configure(None, deepspeed_config=config)
            checkpoint_fn = deepspeed.checkpointing.checkpoint
        model = make_model(train, shape, checkpoint_fn).to(ctx.device)
        counted = model_notes(model)
        if train.compile:
            model = torch.compile(model)
        groups = param_groups(model, train.weight_decay)
        own_optimizer = "optimizer" not in config   # else DeepSpeed builds the JSON's optimizer
        optimizer = torch.optim.AdamW(groups, **adamw_kwargs(train, ctx.device)) if own_optimizer else None
        self.engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config,
                                                    model_parameters=None if own_optimizer else groups,
                                                    dist_init_required=False)
        self.notes = {"fused_adamw_effective": bool(own_optimizer and train.fused_adamw and ctx.device.type == "cuda"),
                      "grad_scaler": bool(config.get("fp16", {}).get("enabled")), **counted}

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return loss_of(self.engine(x, y))

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        self.engine.backward(loss)         # DeepSpeed divides by gradient_accumulation_steps itself
        if not last:
            self.engine.step()

    def step(self) -> None:
        self.engine.step()
