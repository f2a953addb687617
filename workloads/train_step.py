"""Training-step workload: how fast does a GPT-style model train, and at what numeric cost?

One trial trains a GPT-style decoder (workloads/model.py) for warm-up + measured
optimizer steps and times each step in phases:

    data_wait   the next micro-batch (synthetic: an index into a pool; shards: the DataLoader)
    h2d         host-to-device copy of it (shards only)
    forward     forward pass and loss, under autocast for bf16/fp16
    backward    backward pass; DDP/FSDP gradient communication overlaps it, so it is counted here
    optimizer   AdamW step (ZeRO-1: plus the parameter broadcast), zero_grad(set_to_none=True)

With accumulation the micro-batch phases add up within a step. The trial's probe
times GPU phases with CUDA events, so the loop's one host sync a step is reading
that step's loss (train.phase_sync=true adds a sync at every phase edge, for a
host-clock probe such as a notebook's Probe()). One rank runs while probe.more()
says so; several ranks run exactly warmup_steps + steps, the same on every rank.
Defaults live in sweeper/schema/train.py (TrainConfig); the ones that matter:

    preset=tiny               tiny: 2 layers x 64 wide, T=64, vocab 512: seconds on a CPU
                              gpt2-124m: 12 layers x 768, 12 heads, T=1024, vocab 50257: the GPU one
    precision=fp32            fp32 | tf32 | bf16 | fp16; a CPU runs fp32, bf16 and fp16 (tf32 runs as fp32)
    micro_batch=8             effective batch = micro_batch x accum_steps x world_size sequences
    accum_steps=1
    compile=false             torch.compile
    zero_stage=0              0 DDP | 1 DDP + ZeroRedundancyOptimizer | 2, 3 FSDP2 (see workloads/parallel.py)
    world_size=1              ranks, started by this trial (workloads/distributed.py)
    model=null                a user's factory, package.module:factory (workloads/user_model.py)
    data_source=synthetic     synthetic: a fixed pool of random batches on the device, as nanoGPT's
                              bench.py (no loading cost; the model memorises the pool, so the loss falls);
                              shards: the dataloader workload's shards (data.*), so data waits show

Figures: tokens/s, samples/s, MFU (docs/train_step.md has the formula), peak memory
per rank, loss_initial and loss_final (mean over ranks, after loss_steps optimizer
steps) for numeric drift against the fp32 / ZeRO-0 trial of the same seed
(sweeper/analysis/drift.py).
"""
from __future__ import annotations

import dataclasses
import json
import resource
import statistics
import time
from typing import Any, Dict, List

import torch
import torch._dynamo  # noqa: F401  AdamW imports it on first use (~4 s): once here, before ranks fork
import torch.distributed as dist

from workloads import deepspeed_config, distributed, parallel
from workloads.distributed import RankContext
from workloads.model import ModelShape, estimate_flops_per_token, flops_per_token, num_params
from workloads.specs import TRAIN_STEP as SPEC  # noqa: F401  what the core knows of this workload

# Dense bf16 peak per GPU (datasheets; torchtitan's tools/utils.py). Matched by substring of the name.
PEAK_FLOPS = (("H100", 989e12), ("H200", 989e12), ("A100", 312e12))


def run(cfg, probe) -> Dict[str, Any]:
    train = cfg.train
    if train.backend == "deepspeed":
        parallel.require_deepspeed(cfg.workload.device)
    if needs_process_group(train):
        per_rank = distributed.run_ranks(cfg, probe, train_rank)
    else:
        probe.set_figure("threads_per_rank", torch.get_num_threads())
        ctx = RankContext(0, 1, torch.device(cfg.workload.device), False)
        train_rank(cfg, probe, ctx)
        per_rank = [ctx.figures]
    return trial_figures(cfg, probe, per_rank)


def needs_process_group(train) -> bool:
    return train.world_size > 1 or train.zero_stage > 0 or train.backend == "deepspeed"


# -- one rank -----------------------------------------------------------------------
def train_rank(cfg, probe, ctx: RankContext) -> None:
    """Builds, trains and measures on one rank; fills ctx.figures as it goes."""
    train, device = cfg.train, ctx.device
    shape = ModelShape(**train.shape())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    ctx.figures["precision_effective"] = set_matmul_precision(train.precision, device, probe)
    torch.manual_seed(cfg.workload.seed)                # the same initial weights on every rank
    batches = make_batches(cfg, shape, ctx)
    try:
        ds_config = deepspeed_for_trial(cfg, shape, probe, ctx) if train.backend == "deepspeed" else None
        engine = parallel.build(train, shape, ctx, ds_config)
        ctx.figures.update(engine.notes)
        times, losses = train_loop(cfg, probe, engine, batches, ctx)
        ctx.figures.update(step_figures(times[-cfg.workload.steps:], losses, ctx))
    finally:
        memory = memory_figures(device)
        ctx.figures.update(memory)
        for name, value in memory.items():               # kept even when the step ran out of memory
            probe.set_figure(name, value)
        batches.close()


def deepspeed_for_trial(cfg, shape: ModelShape, probe, ctx: RankContext) -> Dict[str, Any]:
    """The DeepSpeed config this trial runs (the user's JSON resolved, or the engine's own);
    rank 0 stores it in the trial folder as deepspeed_config.json and notes what it overrode."""
    steps = cfg.workload.warmup_steps + cfg.workload.steps
    resolved = deepspeed_config.trial_config(cfg.train, ctx.world_size, shape.n_embd, cfg.workload.warmup_steps, steps)
    if resolved.problems:          # planning refuses these; a notebook's direct call gets here
        raise ValueError(f"train.deepspeed_config={cfg.train.deepspeed_config!r}: " + "; ".join(resolved.problems))
    if ctx.rank == 0:
        out_dir = getattr(probe, "out_dir", None)
        if out_dir is not None:
            (out_dir / "deepspeed_config.json").write_text(json.dumps(resolved.config, indent=2, sort_keys=True))
        for line in resolved.overridden:
            probe.warn(f"train.deepspeed_config: the sweep's axis overrode the JSON's {line}")
        ctx.figures["deepspeed_overridden"] = "; ".join(resolved.overridden)
    return resolved.config


def set_matmul_precision(precision: str, device: torch.device, probe) -> str:
    """TF32 only for precision=tf32; on a CPU it has no effect, so that trial runs as fp32."""
    if device.type != "cuda":
        if precision == "tf32":
            probe.warn("train.precision=tf32 has no effect on a CPU: the trial ran in fp32")
            return "fp32"
        return precision
    tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    return precision


def train_loop(cfg, probe, engine, batches, ctx: RankContext):
    """Optimizer steps until the probe has its measured steps; returns per-step times (s) and
    mean losses. Nothing in the loop waits for the GPU, as in a plain training script: losses
    stay on the device (the probe reads each back with the step's timings, a few steps later)
    and on a GPU each rank times its steps with CUDA events, read once the loop is done."""
    train = cfg.train
    phase_sync = _sync(ctx.device) if train.phase_sync else _noop
    samples = train.micro_batch * train.accum_steps * ctx.world_size   # the probe's items: sequences, all ranks
    keep_going = _stepper(cfg, probe, ctx)
    clock = StepClock(ctx.device)
    losses: List[torch.Tensor] = []
    while keep_going(len(losses)):
        clock.start()
        with probe.step(items=samples):
            loss_sum = None
            for micro in range(train.accum_steps):
                x, y = next_micro_batch(probe, batches, phase_sync)
                with probe.phase("forward"):
                    loss = engine.forward(x, y)
                    phase_sync()
                with probe.phase("backward"):
                    engine.backward(loss, last=micro == train.accum_steps - 1)
                    phase_sync()
                loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            with probe.phase("optimizer"):
                engine.step()
                phase_sync()
            losses.append(loss_sum / train.accum_steps if train.accum_steps > 1 else loss_sum)
            probe.record(loss=losses[-1])
        clock.stop()
    _sync(ctx.device)()
    _warn_if_unsettled(cfg, probe, ctx)
    return clock.times(), torch.stack(losses).tolist() if losses else []


class StepClock:
    """Per-step times of one rank: CUDA events on a GPU (no sync per step), the host clock on a CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: List[Any] = []

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start(self) -> None:
        self.marks.append([self._mark(), None])

    def stop(self) -> None:
        self.marks[-1][1] = self._mark()

    def times(self) -> List[float]:
        """Seconds per step; on a GPU call it after a synchronize."""
        if self.cuda:
            return [a.elapsed_time(b) / 1e3 for a, b in self.marks]
        return [b - a for a, b in self.marks]


def _stepper(cfg, probe, ctx: RankContext):
    """One rank runs as long as the probe wants (with probe.settle its warm-up ends when step
    times settle). Several ranks run a fixed warmup_steps + steps: they must agree on the count."""
    more = getattr(probe, "more", None)
    if more is not None and ctx.world_size == 1:
        return lambda done: more(cfg.workload.steps)
    return lambda done: done < cfg.workload.warmup_steps + cfg.workload.steps


def _warn_if_unsettled(cfg, probe, ctx: RankContext) -> None:
    more = getattr(probe, "more", None)
    if ctx.world_size > 1 and more is not None and more(cfg.workload.steps):
        probe.warn(f"a trial of {ctx.world_size} ranks runs exactly workload.warmup_steps + workload.steps "
                   f"steps, so the probe's settled warm-up left fewer than {cfg.workload.steps} measured steps")


def next_micro_batch(probe, batches, phase_sync):
    with probe.phase("data_wait"):
        batch = batches.next()
    if not batches.needs_h2d:
        return batch
    with probe.phase("h2d"):
        batch = batches.to_device(batch)
        phase_sync()
    return batch


def _sync(device: torch.device):
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else _noop


def _noop() -> None:
    pass


# -- batches ------------------------------------------------------------------------
class SyntheticBatches:
    """nanoGPT bench.py's synthetic switch: random token batches made once, on the device."""
    needs_h2d = False

    def __init__(self, train, shape: ModelShape, seed: int, rank: int, device: torch.device):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + rank)   # each rank its own data
        pool = torch.randint(0, shape.vocab_size, (train.synthetic_batches, train.micro_batch, shape.seq_len + 1),
                             generator=generator)
        self.x = pool[:, :, :-1].contiguous().to(device)
        self.y = pool[:, :, 1:].contiguous().to(device)
        self.index = 0

    def next(self):
        i = self.index % len(self.x)
        self.index += 1
        return self.x[i], self.y[i]

    def close(self) -> None:
        pass


class ShardBatches:
    """Micro-batches from the dataloader workload's shards; each rank reads its own shards."""
    needs_h2d = True

    def __init__(self, cfg, shape: ModelShape, rank: int, world: int, device: torch.device):
        from workloads.train_data import rank_loader

        data = dataclasses.replace(cfg.data, batch_size=cfg.train.micro_batch)
        self.pin = data.pin_memory and device.type == "cuda"
        self.loader = rank_loader(data, self.pin, rank, world)
        self.device, self.seq_len = device, shape.seq_len
        self.it, self.epochs = iter(self.loader), 0

    def next(self) -> torch.Tensor:
        while True:
            try:
                return next(self.it)
            except StopIteration:          # a new pass over the shards
                self.epochs += 1
                if self.epochs > 1000:
                    raise RuntimeError("the shards hold fewer samples than one micro-batch") from None
                self.it = iter(self.loader)

    def to_device(self, batch: torch.Tensor):
        batch = batch[:, : self.seq_len + 1].to(self.device, non_blocking=self.pin).long()
        return batch[:, :-1], batch[:, 1:]

    def close(self) -> None:
        self.it = None                     # shuts down the loader's worker processes


def make_batches(cfg, shape: ModelShape, ctx: RankContext):
    if cfg.train.batch:
        from workloads.user_model import UserBatches

        return UserBatches(cfg, ctx.rank, ctx.world_size, ctx.device)
    if cfg.train.data_source == "shards":
        return ShardBatches(cfg, shape, ctx.rank, ctx.world_size, ctx.device)
    return SyntheticBatches(cfg.train, shape, cfg.workload.seed, ctx.rank, ctx.device)


# -- figures ------------------------------------------------------------------------
def memory_figures(device: torch.device) -> Dict[str, float]:
    """Peak memory of this rank, in GB (1e9 bytes): the CUDA allocator's, or the process's RSS on a CPU."""
    if device.type == "cuda":
        from sweeper.measure.memory import cuda_peaks   # the probe resets the peaks every step

        peaks = cuda_peaks(torch, device)
        return {"peak_memory_allocated_gb": peaks["allocated_bytes"] / 1e9,
                "peak_memory_reserved_gb": peaks["reserved_bytes"] / 1e9}
    return {"peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}


def step_figures(measured: List[float], losses: List[float], ctx: RankContext) -> Dict[str, Any]:
    out = {"step_p50_s": statistics.median(measured), "step_mean_s": sum(measured) / len(measured),
           "steps_measured": len(measured), "steps_run": len(losses),
           "loss_initial_local": losses[0], "loss_final_local": losses[-1],
           "threads": torch.get_num_threads()}
    out["loss_initial"], out["loss_final"] = _mean_over_ranks([losses[0], losses[-1]], ctx)
    return out


def _mean_over_ranks(values: List[float], ctx: RankContext) -> List[float]:
    if not ctx.distributed or ctx.world_size == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)                     # SUM: gloo has no AVG
    return [v / ctx.world_size for v in t.tolist()]


def peak_flops(train, device_type: str) -> tuple:
    """(peak FLOP/s per device, where the number came from); (None, None) when unknown."""
    if train.peak_flops:
        return train.peak_flops, "train.peak_flops"
    if device_type != "cuda":
        return None, None
    name = torch.cuda.get_device_name()
    for key, value in PEAK_FLOPS:
        if key in name:
            return value, f"datasheet dense bf16 peak of {name}"
    return None, None


def trial_figures(cfg, probe, per_rank: List[Dict[str, Any]]) -> Dict[str, Any]:
    train, shape = cfg.train, ModelShape(**cfg.train.shape())
    rank0 = per_rank[0]
    samples = train.micro_batch * train.accum_steps * train.world_size
    tokens_per_s = samples * shape.seq_len / rank0["step_mean_s"]
    peak, source = peak_flops(train, cfg.workload.device)
    n_params, flops, flops_source = model_flops(train, shape, rank0)
    out: Dict[str, Any] = {
        **dataclasses.asdict(shape), "model": train.model or f"preset {train.preset}", "n_params": n_params,
        "flops_per_token": flops, "flops_source": flops_source,
        "precision": train.precision, "precision_effective": rank0["precision_effective"],
        "zero_stage": train.zero_stage, "world_size": train.world_size, "backend": train.backend,
        "compile": train.compile, "activation_checkpointing": train.activation_checkpointing,
        "data_source": train.data_source, "seed": cfg.workload.seed,
        "micro_batch": train.micro_batch, "accum_steps": train.accum_steps,
        "effective_batch": samples, "tokens_per_step": samples * shape.seq_len,
        "tokens_per_s": tokens_per_s, "samples_per_s": tokens_per_s / shape.seq_len,
        "peak_flops": peak, "peak_flops_source": source,
        "mfu": tokens_per_s * flops / (peak * train.world_size) if peak else None,
        "loss_initial": rank0["loss_initial"], "loss_final": rank0["loss_final"],
        "loss_steps": rank0["steps_run"],
    }
    out.update({k: v for k, v in rank0.items() if k in ("fused_adamw_effective", "grad_scaler", "n_blocks",
                                                         "checkpointed_blocks", "parallel", "fsdp_units",
                                                         "deepspeed_overridden")})
    for rank, figures in enumerate(per_rank):
        out.update({f"rank{rank}_{k}": v for k, v in figures.items() if _per_rank(k)})
    out.update(_max_over_ranks(per_rank, probe))
    if train.data_source == "shards":   # for the analysis' shards and pinned-memory warnings (pitfalls.py)
        from workloads.dataloader import shard_paths

        out.update(num_shards=len(shard_paths(cfg.data)), batch_bytes=train.micro_batch * (cfg.data.seq_len + 1) * 4)
    return out


def model_flops(train, shape: ModelShape, rank0: Dict[str, Any]) -> tuple:
    """(parameters, training FLOPs a token, where the FLOPs came from). The preset's N comes from
    its shape, without position embeddings (nanoGPT); a user's model's N is its parameters counted
    once, and the attention term uses train's n_layer, n_embd and seq_len. train.flops_per_token wins."""
    if train.model:
        n_params = rank0["n_params_counted"]
        estimate = estimate_flops_per_token(n_params, shape.n_layer, shape.n_embd, shape.seq_len)
    else:
        n_params, estimate = num_params(shape, non_embedding=False), flops_per_token(shape)
    if train.flops_per_token:
        return n_params, float(train.flops_per_token), "given"
    return n_params, estimate, "estimated 6N+attn"


def _per_rank(key: str) -> bool:
    return key.startswith(("step_", "peak_", "loss_final_local", "threads"))


def _max_over_ranks(per_rank: List[Dict[str, Any]], probe) -> Dict[str, float]:
    out = {}
    for key in ("peak_memory_allocated_gb", "peak_memory_reserved_gb", "peak_rss_gb", "step_p50_s"):
        values = [f[key] for f in per_rank if f.get(key) is not None]
        if values:
            name = key if key.startswith("peak_") else f"{key}_max_rank"
            out[name] = max(values)
            probe.set_figure(name, out[name])
    return out
