"""Why is the training-step workload slower than a plain PyTorch script? A diagnosis script for a 2-GPU host.

Times, on the same host and in the same way, a self-contained "plain" nanoGPT-style GPT-2 124M
training loop (the plain-script reference, rebuilt here) against the workload's own pieces
(workloads.model.GPT + workloads.parallel.NativeEngine, and workloads.train_step.train_loop with
the trial's probe), then variants that each change one thing, so the gap can be attributed.

    python benchmarks/gpu_zero_diag.py                        # 1 GPU, then world size 2 (ZeRO 0-3); < 6 min
    python benchmarks/gpu_zero_diag.py --compile              # + torch.compile plain vs ours on 1 GPU (~40 s)
    python benchmarks/gpu_zero_diag.py --parts multi --only z2 z3   # only names containing z2 or z3
    python benchmarks/gpu_zero_diag.py --device cpu --tiny    # smoke test on a CPU: tiny model, gloo, 2 ranks

Every variant builds a fresh model, runs warm-up steps, then `--steps` steps timed with one synchronize
at each end ("thru", as the plain-script reference was timed; "halves" splits them in two), then "cpu":
the host time to enqueue one step while a sleep kernel holds the GPU (the step's CPU cost alone; near
"thru" means the step is host-bound), then `--sync-steps` steps each ending in loss.item() and timed on
the host ("synced", as the workload's loop runs: it reads each step's loss). The workload-loop rows run
workloads.train_step.train_loop itself; "probe(events)" is the trial probe's CUDA-event step p50, the
figure a one-GPU sweep reports. Multi-rank figures are rank 0's (max over ranks in the JSON lines).
FSDP2 steps turned out host-bound on the H200 hosts, so z2/z3 plain and ours also run in `--ab-rounds`
interleaved rounds, and the attribution takes medians. Peak memory: torch.cuda.max_memory_allocated per
variant (reset before the model is built). Each result is printed as soon as it is measured; a table
and an attribution of the gap come last. With --out DIR (default $OUT) rows also go to DIR/gpu_zero_diag.jsonl.

Settings follow the workload's: bf16 autocast (FSDP2: MixedPrecisionPolicy), fused AdamW (lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on matrices), zero_grad(set_to_none=True), synthetic token batches
(a pool of 8 on the device), float32 matmul precision "highest" and cudnn.allow_tf32=False as
workloads.train_step.set_matmul_precision sets them for bf16 (variant 1gpu/plain:tf32 flips them).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import inspect
import json
import os
import socket
import statistics
import sys
import textwrap
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T0 = time.time()
SHAPES = {   # (n_layer, n_head, n_embd, seq_len, vocab_size): the workload's presets
    "gpt2-124m": (12, 12, 768, 1024, 50257),
    "tiny": (2, 4, 64, 64, 512),
}


def log(msg: str = "") -> None:
    print(msg, flush=True)


# =====================================================================================
# The plain reference: a minimal nanoGPT-style GPT-2 and training loop, nothing from the project
# =====================================================================================
def plain_classes():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.n_head = n_head
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class PlainGPT(nn.Module):
        def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, float_logits=False):
            super().__init__()
            self.float_logits = float_logits
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight          # tied, as nanoGPT
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, idx, targets):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            if self.float_logits:
                logits = logits.float()
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return PlainGPT


def plain_optimizer(model, device):
    """nanoGPT's configure_optimizers: decay on >=2-D params, fused AdamW on CUDA."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **extra)


def plain_zero_optimizer(model, device):
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=6e-4, betas=(0.9, 0.95),
                                   eps=1e-8, **extra)


def build_plain(env, float_logits=False):
    import torch

    n_layer, n_head, n_embd, seq_len, vocab = env.shape
    padded = (vocab + 63) // 64 * 64
    torch.manual_seed(0)
    model = plain_classes()(n_layer, n_head, n_embd, seq_len, padded, float_logits=float_logits)
    return model.to(env.device)


def fsdp_wrap(model, blocks, stage, param_dtype, reduce_dtype, extra_units=()):
    """FSDP2: each block its own unit (plus any extra_units), then the root."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    reshard = stage == 3
    for unit in list(blocks) + list(extra_units):
        fully_shard(unit, reshard_after_forward=reshard, mp_policy=policy)
    return fully_shard(model, reshard_after_forward=reshard, mp_policy=policy)


# =====================================================================================
# Per-process environment: device, shape, batches, timing
# =====================================================================================
class Env:
    def __init__(self, args, rank: int, world: int):
        import torch

        self.args, self.rank, self.world = args, rank, world
        self.distributed = world > 1
        if args.device == "cuda":
            torch.cuda.set_device(rank)
            self.device = torch.device("cuda", rank)
        else:
            self.device = torch.device("cpu")
        self.shape = SHAPES[args.preset]
        self.micro_batch = args.micro_batch
        self.dtype = torch.bfloat16 if args.precision == "bf16" else None
        self.results: List[Dict[str, Any]] = []
        self.deadline = start_time(args) + args.budget_s
        self.last_cost = 0.0
        self.out_file = Path(args.out) / "gpu_zero_diag.jsonl" if args.out and rank == 0 else None
        vocab = self.shape[4]
        g = torch.Generator().manual_seed(1000 + rank)
        pool = torch.randint(0, vocab, (8, self.micro_batch, self.shape[3] + 1), generator=g)
        self.xs = pool[:, :, :-1].contiguous().to(self.device)
        self.ys = pool[:, :, 1:].contiguous().to(self.device)
        self.i = 0

    def batch(self):
        i = self.i % len(self.xs)
        self.i += 1
        return self.xs[i], self.ys[i]

    def autocast(self):
        import torch

        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def sync(self):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self):
        import torch.distributed as dist

        if self.distributed:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()

    def train_cfg(self, stage: int, compile_: bool = False):
        from sweeper.schema import TrainConfig

        return TrainConfig(preset=self.args.preset, micro_batch=self.micro_batch, precision=self.args.precision,
                           zero_stage=stage, world_size=self.world, compile=compile_)

    def rank_ctx(self):
        from workloads.distributed import RankContext

        return RankContext(self.rank, self.world, self.device, self.distributed)


def free_memory(env) -> None:
    import torch

    gc.collect()
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(env.device)


def peak_gb(env):
    import torch

    if env.device.type != "cuda":
        return None, None
    return torch.cuda.max_memory_allocated(env.device) / 1e9, torch.cuda.max_memory_reserved(env.device) / 1e9


def alloc_counters(env) -> Dict[str, int]:
    """Caching-allocator counters: retries (a cudaFree of the whole cache, which synchronises) and cudaMalloc calls."""
    import torch

    if env.device.type != "cuda":
        return {}
    stats = torch.cuda.memory_stats(env.device)
    return {k: int(stats.get(k, 0)) for k in ("num_alloc_retries", "num_device_alloc", "num_ooms")}


def sleep_cycles(env, seconds: float) -> int:
    """GPU clock cycles for torch.cuda._sleep to hold the stream about `seconds` (calibrated once)."""
    import torch

    if getattr(env, "_cycles_per_s", None) is None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(int(5e7))
        end.record()
        end.synchronize()
        env._cycles_per_s = 5e7 / (start.elapsed_time(end) / 1e3)
    return int(env._cycles_per_s * seconds)


def cpu_issue_ms(env, step: Callable[[], Any], hold_s: float = 0.3, tries: int = 2) -> Dict[str, Any]:
    """Host time to enqueue one step while the GPU is held busy by a sleep kernel: the step's CPU cost
    alone (launches, Python, hooks, dispatch). Near hold_s means it could not run ahead: a host sync
    inside the step, or a full launch queue."""
    import torch

    if env.device.type != "cuda" or hold_s <= 0:
        return {}
    best = None
    cycles = sleep_cycles(env, hold_s)
    for _ in range(tries):
        env.sync()
        env.barrier()
        torch.cuda._sleep(cycles)
        t = time.perf_counter()
        step()
        issue = time.perf_counter() - t
        env.sync()
        best = issue if best is None else min(best, issue)
    out = {"cpu_ms": best * 1e3}
    if best > 0.8 * hold_s:
        out["cpu_note"] = "enqueue blocked: sync inside the step or launch queue full"
    return out


def measure(env, step: Callable[[], Any]) -> Dict[str, Any]:
    """warm-up; `steps` steps with a sync only at both ends (and one in the middle, for the two halves);
    the CPU issue time of one step; `sync_steps` steps each ending in loss.item()."""
    a = env.args
    for _ in range(a.warmup):
        loss = step()
    env.sync()
    env.barrier()
    before = alloc_counters(env)
    halves = []
    for n in (a.steps // 2, a.steps - a.steps // 2):
        t = time.perf_counter()
        for _ in range(n):
            loss = step()
        env.sync()
        halves.append((time.perf_counter() - t) / max(n, 1) * 1e3)
    thru = (halves[0] * (a.steps // 2) + halves[1] * (a.steps - a.steps // 2)) / a.steps
    out: Dict[str, Any] = {"thru_ms": thru, "thru_halves_ms": halves}
    value = loss.item()
    if a.cpu_hold_s > 0:        # hold the GPU well past the step's own time, so a CPU-bound step still fits
        out.update(cpu_issue_ms(env, step, max(a.cpu_hold_s, 2.5 * thru / 1e3)))
    env.barrier()
    per = []
    for _ in range(a.sync_steps):
        t = time.perf_counter()
        loss = step()
        value = loss.item()
        per.append(time.perf_counter() - t)
    env.sync()
    after = alloc_counters(env)
    if per:
        per_ms = sorted(x * 1e3 for x in per)
        out.update(synced_ms=statistics.median(per_ms), synced_p90_ms=per_ms[min(len(per_ms) - 1, int(0.9 * len(per_ms)))],
                   synced_min_ms=per_ms[0])
    else:
        out["synced_ms"] = None
    grew = {k: after[k] - before[k] for k in after if after[k] - before[k]}
    if grew:
        out["alloc_events_in_timed_steps"] = grew
    out["loss"] = value
    return out


# =====================================================================================
# Step functions: plain, ours (NativeEngine), and the workload's own loop
# =====================================================================================
def plain_step(env, model, opt, autocast=True, set_to_none=True):
    ctx = env.autocast if autocast else contextlib.nullcontext

    def step():
        x, y = env.batch()
        with ctx():
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return loss

    return step


def engine_step(env, engine):
    """A bare loop over the engine's three calls, as train_loop makes them, without the probe."""
    def step():
        x, y = env.batch()
        loss = engine.forward(x, y)
        engine.backward(loss, last=True)
        engine.step()
        return loss

    return step


class PlainEngine:
    """The plain model and loop behind the workload engine's three calls (for train_loop)."""

    def __init__(self, model, optimizer, autocast):
        self.model, self.optimizer, self._autocast = model, optimizer, autocast
        self.notes = {}

    def forward(self, x, y):
        with self._autocast():
            return self.model(x, y)

    def backward(self, loss, last):
        loss.backward()

    def step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def knobbed_engine_class():
    """NativeEngine with knobs: autocast, FSDP2 reduce dtype, set_requires_gradient_sync, untied head,
    torchtitan-style units, zero_grad(set_to_none). Everything else is the workload's code."""
    import torch
    import torch.nn as nn

    from workloads import parallel

    class Knobbed(parallel.NativeEngine):
        def __init__(self, train, shape, ctx, autocast=True, reduce_dtype=torch.float32, grad_sync=True,
                     untie=False, titan_units=False, set_to_none=True):
            self.knobs = dict(reduce_dtype=reduce_dtype, untie=untie, titan_units=titan_units,
                              set_to_none=set_to_none)
            super().__init__(train, shape, ctx)
            if not autocast:
                self.autocast = contextlib.nullcontext
            if not grad_sync and self.sync_mode == "fsdp":
                self.sync_mode = "none"        # skips set_requires_gradient_sync(last) every step

        def _wrap(self, model, train, ctx):
            if self.knobs["untie"]:
                model.lm_head.weight = nn.Parameter(model.wte.weight.detach().clone())
            if ctx.distributed and train.zero_stage >= 2:
                dtype = parallel.AMP_DTYPES.get(train.precision)
                extra = [model.wte, model.lm_head] if self.knobs["titan_units"] else []
                return fsdp_wrap(model, model.h, train.zero_stage, dtype,
                                 self.knobs["reduce_dtype"] if dtype else None, extra), "fsdp"
            return parallel.NativeEngine._wrap(model, train, ctx)

        def step(self):
            if self.knobs["set_to_none"]:
                return super().step()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=False)

    return Knobbed


@contextlib.contextmanager
def gpt_without_float_logits():
    """workloads.model.GPT.forward with `logits.float()` taken out (built from its own source, so any
    other change made to the model since stays in); a note says so when there is none to take out."""
    from workloads import model as wm

    original = wm.GPT.forward
    src = textwrap.dedent(inspect.getsource(original))
    patched_src = src.replace("logits.float()", "logits")
    if patched_src == src:
        log("   note: workloads.model.GPT.forward has no `logits.float()`: this variant equals ours")
        yield
        return
    namespace: Dict[str, Any] = {}
    exec(compile(patched_src, "<GPT.forward without logits.float()>", "exec"), vars(wm), namespace)
    wm.GPT.forward = namespace["forward"]
    try:
        yield
    finally:
        wm.GPT.forward = original


@contextlib.contextmanager
def tf32_on():
    import torch

    old = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old[0])
        torch.backends.cudnn.allow_tf32 = old[1]


def make_probe(env, kind: str):
    """The trial's probe on rank 0 (kind 'probe': sampler off, as benchmarks/gpu_train_check.py;
    'probe-default': ProbeConfig() as a sweep runs it, 10 Hz sampler + memory every 10 steps),
    NullProbe elsewhere or for kind 'null'."""
    from workloads.distributed import NullProbe

    if env.rank != 0 or kind == "null":
        return NullProbe(), contextlib.nullcontext()
    from sweeper.probe import Probe
    from sweeper.schema import ProbeConfig

    cfg = ProbeConfig() if kind == "probe-default" else ProbeConfig(sample_hz=0, memory_every=0)
    probe = Probe.for_trial(cfg, env.device.type, env.args.warmup)
    return probe, probe


def run_train_loop(env, engine, stage: int, probe_kind: str) -> Dict[str, Any]:
    """workloads.train_step.train_loop itself, as a trial runs it (its loss.item() per step included)."""
    from sweeper.schema import TrialConfig, WorkloadConfig
    from workloads import train_step

    a = env.args
    train = env.train_cfg(stage)
    cfg = TrialConfig(workload=WorkloadConfig(target="workloads.train_step:run", steps=a.steps,
                                              warmup_steps=a.warmup, device=a.device), train=train)
    batches = train_step.SyntheticBatches(train, _shape(env), cfg.workload.seed, env.rank, env.device)
    probe, cm = make_probe(env, probe_kind)
    with cm:
        times, losses = train_step.train_loop(cfg, probe, engine, batches, env.rank_ctx())
    measured = times[-a.steps:]
    out = {"thru_ms": None, "synced_ms": statistics.median(measured) * 1e3, "host_mean_ms": statistics.mean(measured) * 1e3,
           "loss": losses[-1]}
    if hasattr(probe, "summary"):
        p50 = probe.summary().get("step_p50_s")
        out["probe_ms"] = p50 * 1e3 if p50 is not None else None
        if probe.warnings:
            out["probe_warnings"] = list(probe.warnings)[:3]
    return out


def _shape(env):
    from workloads.model import ModelShape

    return ModelShape(**env.train_cfg(0).shape())


# =====================================================================================
# Variants
# =====================================================================================
def _wanted(env, name: str) -> bool:
    return not env.args.only or any(s in name for s in env.args.only)


def variant(env, name: str, note: str, body: Callable[[], Dict[str, Any]]) -> None:
    """Runs one variant --repeats times (unless filtered out or out of time): a fresh model each time."""
    a = env.args
    if not _wanted(env, name):
        return
    for rep in range(a.repeats):
        _variant_once(env, name if a.repeats == 1 else f"{name}#{rep + 1}", note, body)


def _variant_once(env, name: str, note: str, body: Callable[[], Dict[str, Any]]) -> None:
    """Runs one variant, prints its row at once, keeps it."""
    import torch

    skip = None
    if time.time() + max(env.last_cost * 1.2, 2.0) > env.deadline:
        skip = "skipped: time budget (--budget-s)"
    if env.distributed:                       # ranks must agree on skipping
        import torch.distributed as dist

        flag = [skip]
        dist.broadcast_object_list(flag, src=0)
        skip = flag[0]
    row: Dict[str, Any] = {"name": name, "note": note, "t_s": round(time.time() - start_time(env.args), 1)}
    if skip:
        row["error"] = skip
        _emit(env, row)
        return
    started = time.time()
    free_memory(env)
    try:
        row.update(body())
        alloc, reserved = peak_gb(env)
        row.update(peak_alloc_gb=alloc, peak_reserved_gb=reserved)
    except Exception as exc:                  # one failed variant is a row, not the end
        traceback.print_exc()
        row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
    finally:
        free_memory(env)
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
    env.last_cost = time.time() - started
    row["wall_s"] = env.last_cost
    if env.distributed:
        row.update(_max_over_ranks(env, row))
    _emit(env, row)


def _max_over_ranks(env, row):
    """Every rank calls this once per variant, failed or not, so the collectives stay matched."""
    import torch
    import torch.distributed as dist

    keys = ("thru_ms", "synced_ms", "peak_alloc_gb")
    values = [row.get(k) if row.get(k) is not None else -1.0 for k in keys] + [1.0 if row.get("error") else 0.0]
    t = torch.tensor(values, dtype=torch.float64, device=env.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    out = {f"{k}_max_rank": (v if v >= 0 else None) for k, v in zip(keys, t.tolist())}
    if t[-1].item() and not row.get("error"):
        out["error"] = "failed on another rank (its traceback is above)"
    return out


def _emit(env, row):
    env.results.append(row)
    if env.rank != 0:
        return
    log(format_row(row))
    if env.args.results_file:            # rewritten after every row: survives a kill at the hard deadline
        tmp = Path(env.args.results_file + ".tmp")
        tmp.write_text(json.dumps(env.results, default=str))
        os.replace(tmp, env.args.results_file)
    if env.out_file is not None:
        with open(env.out_file, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")


def _f(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def format_row(r):
    if r.get("error"):
        return f"{r['name']:<34} {r['error']}"
    extra = f" probe(events) {_f(r.get('probe_ms'))}" if r.get("probe_ms") is not None else ""
    if r.get("synced_p90_ms") is not None:
        extra += f" (p90 {_f(r.get('synced_p90_ms'))})"
    if r.get("cpu_ms") is not None:
        extra += f"  cpu {_f(r.get('cpu_ms'))}" + ("!" if r.get("cpu_note") else "")
    if r.get("thru_halves_ms"):
        extra += "  halves " + "/".join(_f(h) for h in r["thru_halves_ms"])
    if r.get("alloc_events_in_timed_steps"):
        extra += f"  alloc {r['alloc_events_in_timed_steps']}"
    return (f"{r['name']:<34} thru {_f(r.get('thru_ms')):>6} ms  synced {_f(r.get('synced_ms')):>6} ms{extra}"
            f"  peak {_f(r.get('peak_alloc_gb'), 2)} GB  loss {_f(r.get('loss'), 4)}  [{r['wall_s']:.1f}s]  {r['note']}")


def single_gpu_variants(env) -> None:
    import torch

    from workloads import parallel
    from workloads.model import ModelShape

    shape = ModelShape(**env.train_cfg(0).shape())
    ctx = env.rank_ctx()
    Knobbed = knobbed_engine_class()

    def plain(float_logits=False, tf32=False, compile_=False):
        def body():
            with (tf32_on() if tf32 else contextlib.nullcontext()):
                model = build_plain(env, float_logits)
                if compile_:
                    model = torch.compile(model)
                opt = plain_optimizer(model, env.device)
                return measure(env, plain_step(env, model, opt))
        return body

    def ours(compile_=False, loop="engine", nofloat=False, set_to_none=True, probe="probe"):
        def body():
            with (gpt_without_float_logits() if nofloat else contextlib.nullcontext()):
                torch.manual_seed(0)
                train = env.train_cfg(0, compile_)
                engine = (Knobbed(train, shape, ctx, set_to_none=False) if not set_to_none
                          else parallel.NativeEngine(train, shape, ctx))
                if loop == "engine":
                    return measure(env, engine_step(env, engine))
                if loop == "plain":
                    return measure(env, plain_step(env, engine.model, engine.optimizer))
                return run_train_loop(env, engine, 0, probe)
        return body

    def plain_in_workload_loop():
        model = build_plain(env)
        return run_train_loop(env, PlainEngine(model, plain_optimizer(model, env.device), env.autocast), 0, "probe")

    log("\n== one device: eager ==")
    variant(env, "1gpu/plain", "plain nanoGPT model + loop (the reference)", plain())
    variant(env, "1gpu/ours", "workloads GPT + NativeEngine, bare loop, no probe", ours())
    variant(env, "1gpu/ours:workload-loop+probe", "train_step.train_loop + trial probe (sampler off)",
            ours(loop="workload", probe="probe"))
    variant(env, "1gpu/ours:nofloat", "ours without logits.float() in GPT.forward", ours(nofloat=True))
    variant(env, "1gpu/plain:float-logits", "plain + logits.float() before cross_entropy", plain(float_logits=True))
    variant(env, "1gpu/ours:plain-loop", "our model+optimizer, plain loop (no scaler, no /accum)", ours(loop="plain"))
    variant(env, "1gpu/ours:workload-loop+null", "train_step.train_loop with NullProbe (no events)",
            ours(loop="workload", probe="null"))
    variant(env, "1gpu/ours:workload-loop+probe-default", "train_loop + ProbeConfig() (10 Hz sampler, NVML, mem/10)",
            ours(loop="workload", probe="probe-default"))
    variant(env, "1gpu/plain:workload-loop+probe", "plain model in train_loop + trial probe", plain_in_workload_loop)
    variant(env, "1gpu/ours:zero_grad-keep", "ours, zero_grad(set_to_none=False)", ours(set_to_none=False))
    variant(env, "1gpu/plain:tf32", "plain with TF32 matmul/cudnn on (nanoGPT's setting)", plain(tf32=True))
    if env.args.compile:
        log("\n== one device: torch.compile ==")
        variant(env, "1gpu/plain:compiled", "plain, torch.compile(model)", plain(compile_=True))
        variant(env, "1gpu/ours:compiled", "ours, train.compile=true", ours(compile_=True))


def multi_gpu_variants(env) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from workloads import parallel
    from workloads.model import ModelShape

    shape = ModelShape(**env.train_cfg(0).shape())
    ctx = env.rank_ctx()
    Knobbed = knobbed_engine_class()
    bf16 = env.dtype
    ids = [env.device.index] if env.device.type == "cuda" else None

    def plain_model(stage, reduce_dtype=torch.float32):
        """(model, optimizer, autocast wanted) for the plain set-up of a stage."""
        model = build_plain(env)
        if stage in (0, 1):
            model = DDP(model, device_ids=ids)
            opt = plain_zero_optimizer(model, env.device) if stage == 1 else plain_optimizer(model, env.device)
            return model, opt
        model = fsdp_wrap(model, model.transformer.h, stage, bf16, reduce_dtype if bf16 else None)
        return model, plain_optimizer(model, env.device)

    def plain(stage, reduce_dtype=torch.float32, autocast=None, loop="plain"):
        def body():
            model, opt = plain_model(stage, reduce_dtype)
            use_autocast = (stage < 2) if autocast is None else autocast
            if loop == "workload":
                cm = env.autocast if use_autocast else contextlib.nullcontext
                return run_train_loop(env, PlainEngine(model, opt, cm), stage, "probe")
            return measure(env, plain_step(env, model, opt, autocast=use_autocast))
        return body

    def ours(stage, loop="engine", nofloat=False, probe="probe", **knobs):
        def body():
            with (gpt_without_float_logits() if nofloat else contextlib.nullcontext()):
                torch.manual_seed(0)
                train = env.train_cfg(stage)
                engine = Knobbed(train, shape, ctx, **knobs) if knobs else parallel.NativeEngine(train, shape, ctx)
                if loop == "engine":
                    return measure(env, engine_step(env, engine))
                if loop == "plain":
                    return measure(env, plain_step(env, engine.model, engine.optimizer))
                return run_train_loop(env, engine, stage, probe)
        return body

    impl = {0: "DDP", 1: "DDP+ZeroRedundancyOptimizer", 2: "FSDP2 no reshard", 3: "FSDP2 reshard"}
    say = log if env.rank == 0 else (lambda *_: None)
    say(f"\n== world size {env.world}: plain vs ours, ZeRO 0-3 ==")
    for s in range(4):
        plain_note = f"plain {impl[s]}" + (", autocast" if s < 2 else ", mp bf16/fp32-reduce, no autocast")
        variant(env, f"z{s}/plain", plain_note, plain(s))
        variant(env, f"z{s}/ours", f"NativeEngine as the workload builds it ({impl[s]}), bare loop", ours(s))
        variant(env, f"z{s}/ours:workload-loop+probe", "train_step.train_loop + trial probe on rank 0",
                ours(s, loop="workload"))
    if env.args.ab_rounds > 0:
        say(f"\n== world size {env.world}: interleaved A/B rounds (FSDP2 is host-bound: noise check) ==")
        for k in range(env.args.ab_rounds):
            for s in (2, 3):
                for who, body in (("plain", plain(s)), ("ours", ours(s))):
                    if _wanted(env, f"z{s}/{who}"):
                        _variant_once(env, f"z{s}/{who}#ab{k + 1}", f"A/B round {k + 1}: {who} again", body)
    say(f"\n== world size {env.world}: FSDP2 isolation ==")
    for s in (2, 3):
        variant(env, f"z{s}/ours:no-autocast", "ours, FSDP2 mp policy only (autocast off)", ours(s, autocast=False))
        variant(env, f"z{s}/ours:reduce-bf16", "ours, MixedPrecisionPolicy reduce_dtype=bf16",
                ours(s, reduce_dtype=torch.bfloat16))
        variant(env, f"z{s}/ours:nofloat", "ours without logits.float()", ours(s, nofloat=True))
        variant(env, f"z{s}/ours:as-plain", "ours: no autocast + no .float() (fp32 reduce, as plain)",
                ours(s, nofloat=True, autocast=False))
        variant(env, f"z{s}/plain:reduce-bf16", "plain FSDP2, reduce_dtype=bf16", plain(s, torch.bfloat16))
        variant(env, f"z{s}/plain:autocast", "plain FSDP2 + bf16 autocast on top (as ours)", plain(s, autocast=True))
    say(f"\n== world size {env.world}: loop, sync call, tied head ==")
    for s in range(4):
        variant(env, f"z{s}/ours:plain-loop", "our model+engine wrapping, plain loop", ours(s, loop="plain"))
    for s in (2, 3):
        variant(env, f"z{s}/ours:no-grad-sync-call", "ours without set_requires_gradient_sync(True) per step",
                ours(s, grad_sync=False))
    for s in range(4):
        variant(env, f"z{s}/plain:workload-loop+probe", "plain set-up inside train_step.train_loop + probe",
                plain(s, loop="workload"))
    for s in (0, 1):
        variant(env, f"z{s}/ours:nofloat", "ours without logits.float()", ours(s, nofloat=True))
    for s in (2, 3):
        variant(env, f"z{s}/ours:untied", "ours with an untied head (+38.6M params): tie in the root unit?",
                ours(s, untie=True))
        variant(env, f"z{s}/ours:untied+titan-units", "untied, wte and lm_head own FSDP units (torchtitan)",
                ours(s, untie=True, titan_units=True))
        variant(env, f"z{s}/ours:as-plain+reduce-bf16", "ours: no autocast, no .float(), reduce bf16",
                ours(s, nofloat=True, autocast=False, reduce_dtype=torch.bfloat16))
    variant(env, "z2/ours:workload-loop+probe-default", "train_loop + ProbeConfig() (sampler, NVML, mem/10)",
            ours(2, loop="workload", probe="probe-default"))


# =====================================================================================
# Processes
# =====================================================================================
def setup_process(args) -> None:
    import torch

    if args.device == "cpu":
        torch.set_num_threads(max(1, args.cpu_threads))
    from workloads.train_step import set_matmul_precision
    from workloads.distributed import NullProbe

    set_matmul_precision(args.precision, torch.device(args.device), NullProbe())   # as train_rank does


def die_with_parent() -> None:
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


def rank_main(rank: int, args, port: int) -> None:
    """One rank of the world-size part (spawned)."""
    die_with_parent()
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    setup_process(args)
    env_device = torch.device("cuda", rank) if args.device == "cuda" else None
    if env_device is not None:
        torch.cuda.set_device(rank)
    backend = "nccl" if args.device == "cuda" else "gloo"
    started = time.time()
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=args.dist_timeout_s), device_id=env_device)
    env = Env(args, rank, args.world_size)
    env.barrier()
    if rank == 0:
        log(f"   ranks up: process group {backend} in {time.time() - started:.1f}s "
            f"(t={time.time() - start_time(args):.0f}s since start)")
    try:
        multi_gpu_variants(env)
    finally:
        with contextlib.suppress(Exception):
            env.barrier()
            dist.destroy_process_group()


def start_time(args) -> float:
    """When the script started: the parent's clock, also in the spawned ranks (their T0 is their import)."""
    return args.t0 if getattr(args, "t0", None) else T0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_multi(args) -> List[Dict[str, Any]]:
    import tempfile

    import torch.multiprocessing as mp

    results_file = Path(tempfile.mkdtemp(prefix="gpu_zero_diag_")) / "multi.json"
    args.results_file = str(results_file)
    args.t0 = T0
    context = mp.get_context("spawn")
    port = free_port()
    procs = [context.Process(target=rank_main, args=(r, args, port), name=f"rank-{r}") for r in range(args.world_size)]
    for p in procs:
        p.start()
    log(f"   started ranks, pids {[p.pid for p in procs]}")
    hard_deadline = T0 + args.budget_s + args.grace_s
    for p in procs:
        p.join(timeout=max(1.0, hard_deadline - time.time()))
    for p in procs:                        # past the hard deadline: end them, by pid
        if p.is_alive():
            log(f"   rank process {p.pid} still running at the hard deadline: killing it")
            p.kill()
            p.join(timeout=10)
    codes = [p.exitcode for p in procs]
    if any(codes):
        log(f"   rank exit codes: {codes}")
    try:
        return json.loads(results_file.read_text())
    except (OSError, ValueError):
        return [{"name": f"z*/(world size {args.world_size})", "note": "", "error": f"no results (exit codes {codes})"}]
    finally:
        import shutil

        shutil.rmtree(results_file.parent, ignore_errors=True)


# =====================================================================================
# Report
# =====================================================================================
# (kind, label, a, b, mode). kind: gap (ours vs plain), reported (the workload's figure vs plain), knob
# (one difference: a has it, b has not), info (context, not ranked). mode: "both" = a - b for thru and synced;
# "reported" = a.synced - b.thru (the workload reads each step's loss; the reference was timed over N steps);
# "sync" = a.synced - a.thru (what a loss.item() per step costs that set-up).
ATTRIBUTION = [
    ("gap", "1gpu gap: ours vs plain", "1gpu/ours", "1gpu/plain", "both"),
    ("reported", "1gpu workload loop+probe (synced) vs plain (thru)", "1gpu/ours:workload-loop+probe", "1gpu/plain",
     "reported"),
    ("knob", "1gpu logits.float()", "1gpu/ours", "1gpu/ours:nofloat", "both"),
    ("info", "1gpu logits.float() added to plain", "1gpu/plain:float-logits", "1gpu/plain", "both"),
    ("info", "1gpu model residual (ours no .float() vs plain)", "1gpu/ours:nofloat", "1gpu/plain", "both"),
    ("knob", "1gpu engine calls (scaler, /accum) vs plain loop", "1gpu/ours", "1gpu/ours:plain-loop", "both"),
    ("knob", "1gpu loss.item() every step (ours)", "1gpu/ours", "1gpu/ours", "sync"),
    ("info", "1gpu loss.item() every step (plain)", "1gpu/plain", "1gpu/plain", "sync"),
    ("knob", "1gpu probe (events, memory stats) vs NullProbe", "1gpu/ours:workload-loop+probe",
     "1gpu/ours:workload-loop+null", "both"),
    ("knob", "1gpu train_loop+NullProbe vs bare engine loop (synced)", "1gpu/ours:workload-loop+null", "1gpu/ours",
     "both"),
    ("info", "1gpu sampler thread (ProbeConfig()) vs sampler off", "1gpu/ours:workload-loop+probe-default",
     "1gpu/ours:workload-loop+probe", "both"),
    ("info", "1gpu harness on the plain model (train_loop+probe, synced)", "1gpu/plain:workload-loop+probe",
     "1gpu/plain", "reported"),
    ("info", "1gpu zero_grad(set_to_none=False) vs True (ours)", "1gpu/ours:zero_grad-keep", "1gpu/ours", "both"),
    ("info", "1gpu TF32 on (plain)", "1gpu/plain:tf32", "1gpu/plain", "both"),
    ("info", "1gpu compiled: ours vs plain", "1gpu/ours:compiled", "1gpu/plain:compiled", "both"),
]
for _s in range(4):
    ATTRIBUTION += [
        ("gap", f"z{_s} gap: ours vs plain", f"z{_s}/ours", f"z{_s}/plain", "both"),
        ("reported", f"z{_s} workload loop+probe (synced) vs plain (thru)", f"z{_s}/ours:workload-loop+probe",
         f"z{_s}/plain", "reported"),
        ("knob", f"z{_s} loss.item() every step (ours)", f"z{_s}/ours", f"z{_s}/ours", "sync"),
        ("info", f"z{_s} loss.item() every step (plain)", f"z{_s}/plain", f"z{_s}/plain", "sync"),
        ("info", f"z{_s} harness on the plain set-up (train_loop+probe, synced)", f"z{_s}/plain:workload-loop+probe",
         f"z{_s}/plain", "reported"),
        ("knob", f"z{_s} engine calls vs plain loop", f"z{_s}/ours", f"z{_s}/ours:plain-loop", "both"),
        ("knob", f"z{_s} logits.float()", f"z{_s}/ours", f"z{_s}/ours:nofloat", "both"),
    ]
for _s in (2, 3):
    ATTRIBUTION += [
        ("knob", f"z{_s} autocast on top of the mp policy", f"z{_s}/ours", f"z{_s}/ours:no-autocast", "both"),
        ("knob", f"z{_s} reduce_dtype fp32 vs bf16 (ours)", f"z{_s}/ours", f"z{_s}/ours:reduce-bf16", "both"),
        ("info", f"z{_s} reduce_dtype fp32 vs bf16 (plain)", f"z{_s}/plain", f"z{_s}/plain:reduce-bf16", "both"),
        ("info", f"z{_s} autocast on top (plain)", f"z{_s}/plain:autocast", f"z{_s}/plain", "both"),
        ("knob", f"z{_s} autocast + .float() together", f"z{_s}/ours", f"z{_s}/ours:as-plain", "both"),
        ("info", f"z{_s} model residual (ours as-plain vs plain)", f"z{_s}/ours:as-plain", f"z{_s}/plain", "both"),
        ("knob", f"z{_s} set_requires_gradient_sync call", f"z{_s}/ours", f"z{_s}/ours:no-grad-sync-call", "both"),
        ("info", f"z{_s} tied head (tied - untied; untied has 38.6M more params)", f"z{_s}/ours",
         f"z{_s}/ours:untied", "both"),
        ("info", f"z{_s} untied: own units for wte/lm_head vs in root", f"z{_s}/ours:untied+titan-units",
         f"z{_s}/ours:untied", "both"),
    ]


def _delta(ra, rb, mode):
    """{tag: (delta, a, b)} in ms for one attribution entry."""
    out = {}
    if mode == "reported":
        va, vb = ra.get("synced_ms"), rb.get("thru_ms")
        if va is not None and vb is not None:
            out["synced-vs-thru"] = (va - vb, va, vb)
    elif mode == "sync":
        va, vb = ra.get("synced_ms"), ra.get("thru_ms")
        if va is not None and vb is not None:
            out["synced-thru"] = (va - vb, va, vb)
    else:
        for key, tag in (("thru_ms", "thru"), ("synced_ms", "synced")):
            va, vb = ra.get(key), rb.get(key)
            if va is not None and vb is not None:
                out[tag] = (va - vb, va, vb)
    return out


def _by_name(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Rows by variant name; repeats (name#k) merged into their median."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for r in rows:
        if not r.get("error"):
            groups.setdefault(r["name"].split("#")[0], []).append(r)
    out = {}
    for name, rs in groups.items():
        merged = dict(rs[0])
        for key in ("thru_ms", "synced_ms", "cpu_ms", "peak_alloc_gb"):
            values = [r[key] for r in rs if r.get(key) is not None]
            merged[key] = statistics.median(values) if values else None
        out[name] = merged
    return out


def _spread_txt(rows: List[Dict[str, Any]], group: str) -> str:
    out = []
    for who in ("plain", "ours"):
        values = [r["thru_ms"] for r in rows if not r.get("error") and r.get("thru_ms") is not None
                  and r["name"].split("#")[0] == f"{group}/{who}"]
        if len(values) > 1:
            out.append(f"{who} thru {min(values):.1f}-{max(values):.1f} ms over {len(values)} runs "
                       f"(median {statistics.median(values):.1f})")
    return "; ".join(out)


def attribution(rows: List[Dict[str, Any]]) -> List[str]:
    by = _by_name(rows)
    lines: List[str] = []
    gaps: Dict[str, Dict[str, float]] = {}
    knobs: Dict[str, List[tuple]] = {}
    for kind, label, a, b, mode in ATTRIBUTION:
        if a not in by or b not in by:
            continue
        d = _delta(by[a], by[b], mode)
        if not d:
            continue
        mark = {"gap": "GAP ", "reported": "GAP*", "knob": "    ", "info": "  i "}[kind]
        lines.append(f" {mark} {label:<64} " + ", ".join(f"{tag} {v[0]:+6.1f} ms ({v[1]:.1f} vs {v[2]:.1f})"
                                                          for tag, v in d.items()))
        group = label.split()[0]
        tag, (first, _, _) = next(iter(d.items()))      # thru where there is one, else the synced figure
        if kind in ("gap", "reported"):
            gaps.setdefault(group, {})[kind] = first
        elif kind == "knob":
            knobs.setdefault(group, []).append((first, label, tag))
    for group in gaps:
        for who in ("plain", "ours"):
            r = by.get(f"{group}/{who}")
            if r and r.get("cpu_ms") and r.get("thru_ms") and r["cpu_ms"] >= 0.8 * r["thru_ms"]:
                lines.append(f"  !! {group}/{who} is host-bound: enqueueing one step takes {r['cpu_ms']:.1f} ms of CPU "
                             f"against {r['thru_ms']:.1f} ms a step: its time follows CPU speed and load, not the GPU")
        spread = _spread_txt(rows, group)
        if spread:
            lines.append(f"  ~~ {group} run-to-run (fresh models, same ranks): {spread}")
    for group, g in gaps.items():
        ranked = [k for k in sorted(knobs.get(group, []), reverse=True) if k[0] > 0][:3]
        gap_txt = ", ".join(f"{'bare thru' if k == 'gap' else 'as reported'} {v:+.1f} ms" for k, v in g.items())
        if not ranked:
            lines.append(f"  => {group}: gap {gap_txt}; no knob measured here makes ours slower")
            continue
        ref = g.get("reported", g.get("gap"))
        what = "; ".join(f"{label.split(' ', 1)[1]} {delta:+.1f} ms ({tag})" for delta, label, tag in ranked)
        share = f" [largest = {100 * ranked[0][0] / ref:.0f}% of the reported gap]" if ref and ref > 0.5 else ""
        lines.append(f"  => {group}: gap {gap_txt}; explained most by: {what}{share}")
    return lines


def print_report(rows: List[Dict[str, Any]]) -> None:
    log("\n== summary (ms/step: thru = sync at both ends of N steps; synced = p50 with loss.item() each step; "
        "rank 0) ==")
    log("(cpu = host time to enqueue one step while the GPU is held busy: near or above thru = CPU-bound; "
        "peak of workload-loop+probe rows: see the note below)")
    log(f"{'variant':<40} {'thru ms':>8} {'synced':>8} {'probe':>7} {'cpu ms':>7} {'peak GB':>8}  note")
    for r in rows:
        if r.get("error"):
            log(f"{r['name']:<40} {'-':>8} {'-':>8} {'-':>7} {'-':>7} {'-':>8}  {r['error']}")
            continue
        log(f"{r['name']:<40} {_f(r.get('thru_ms')):>8} {_f(r.get('synced_ms')):>8} {_f(r.get('probe_ms')):>7} "
            f"{_f(r.get('cpu_ms')):>7} {_f(r.get('peak_alloc_gb'), 2):>8}  {r.get('note', '')}")
    if any("probe" in r["name"] and "workload-loop" in r["name"] for r in rows):
        log("note: the trial probe's CudaMemory resets the peak after every step, so max_memory_allocated read after "
            "train_loop (this table, and train_step.memory_figures on rank 0) sees only what came after the last step")
    lines = attribution(rows)
    if lines:
        log("\n== attribution (a - b; positive: the first is slower) ==")
        for line in lines:
            log(line)


# =====================================================================================
def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="the tiny preset (2 x 64, T=64, vocab 512), micro-batch 4, "
                   "2 warm-up + 3 + 2 steps: a smoke test")
    p.add_argument("--preset", choices=tuple(SHAPES), default=None, help="default gpt2-124m (tiny with --tiny)")
    p.add_argument("--micro-batch", type=int, default=None, help="default 16 (4 with --tiny)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps per variant (default 5; 2 with --tiny)")
    p.add_argument("--steps", type=int, default=None, help="steps timed with a sync at both ends (default 20)")
    p.add_argument("--sync-steps", type=int, default=None, help="steps timed each with loss.item() (default 10)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--parts", default="single,multi", help="comma list: single (1 device), multi (world size)")
    p.add_argument("--only", nargs="*", default=None, help="run only variants whose name contains one of these")
    p.add_argument("--compile", action="store_true", help="also compiled plain vs ours on one device (~20 s each)")
    p.add_argument("--repeats", type=int, default=1, help="run each variant this many times, each with a fresh "
                   "model (rows name#k; the attribution takes medians)")
    p.add_argument("--cpu-hold-s", type=float, default=0.12, help="least GPU hold for the CPU issue-time probe "
                   "(at least 2.5 x the step; 0: probe off)")
    p.add_argument("--ab-rounds", type=int, default=2, help="extra interleaved rounds of z2/z3 plain and ours "
                   "(same process group, fresh models) for run-to-run noise; 0: none")
    p.add_argument("--budget-s", type=float, default=320.0, help="no variant starts after this many seconds "
                   "(the whole script stays under it plus --grace-s)")
    p.add_argument("--single-budget-s", type=float, default=None,
                   help="the one-device part stops starting variants at this time (default 100, 160 with --compile)")
    p.add_argument("--grace-s", type=float, default=20.0, help="rank processes still running this long after "
                   "--budget-s are killed")
    p.add_argument("--dist-timeout-s", type=float, default=120.0)
    p.add_argument("--cpu-threads", type=int, default=1, help="torch threads per process on --device cpu")
    p.add_argument("--out", default=os.environ.get("OUT"), help="folder for gpu_zero_diag.jsonl (default $OUT)")
    args = p.parse_args(argv)
    args.preset = args.preset or ("tiny" if args.tiny else "gpt2-124m")
    args.micro_batch = args.micro_batch or (4 if args.tiny else 16)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.tiny else 5)
    args.steps = args.steps or (3 if args.tiny else 20)
    args.sync_steps = args.sync_steps if args.sync_steps is not None else (2 if args.tiny else 10)
    args.single_budget_s = args.single_budget_s or (160.0 if args.compile else 100.0)
    args.results_file = None
    args.t0 = None
    return args


def main(argv=None) -> int:
    args = parse(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    import torch

    log(f"gpu_zero_diag: torch {torch.__version__}, cuda {torch.version.cuda}, python {sys.version.split()[0]}, "
        f"device {args.device}, preset {args.preset}, micro-batch {args.micro_batch}, {args.precision}, "
        f"warm-up {args.warmup} + {args.steps} thru + {args.sync_steps} synced steps, budget {args.budget_s:.0f}s")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            log("no CUDA device here: use --device cpu --tiny for a smoke test")
            return 2
        log(f"   {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}; sdpa flash "
            f"{torch.backends.cuda.flash_sdp_enabled()}, cudnn {torch.backends.cuda.cudnn_sdp_enabled()}, "
            f"mem-efficient {torch.backends.cuda.mem_efficient_sdp_enabled()}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    if "single" in parts:
        setup_process(args)
        env = Env(args, 0, 1)
        env.deadline = min(T0 + args.single_budget_s, T0 + args.budget_s)
        log(f"   imports and set-up: {time.time() - T0:.1f}s")
        single_gpu_variants(env)
        rows += env.results
        del env
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if "multi" in parts and args.world_size > 1:
        if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
            log(f"\nworld size {args.world_size} needs {args.world_size} GPUs; this host has "
                f"{torch.cuda.device_count()}: skipped")
        else:
            log(f"\n== starting {args.world_size} ranks ({'nccl' if args.device == 'cuda' else 'gloo'}) "
                f"at t={time.time() - T0:.0f}s ==")
            rows += run_multi(args)
    print_report(rows)
    log(f"\ntotal {time.time() - T0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
