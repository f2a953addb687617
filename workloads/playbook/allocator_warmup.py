"""Allocator warm-up: the peak memory of loading a model's weights, then its first
training step, with and without a caching-allocator warm-up.

Loading copies the weights tensor by tensor from host memory (as a checkpoint loader
does) into a model built on the meta device. The warm-up (warmup=true) first reserves
the weights' total bytes in one block and frees it, so PyTorch's caching allocator
keeps that block and carves the weights out of it (what transformers' caching-allocator
warm-up does): fewer device allocations, but a block that the first step's activations
and optimizer state may not fit around, which is how a warm-up can raise the peak and
run out of memory. Each step after loading is forward, backward, AdamW.

Figures (MB): load_peak_mb, step_peak_mb (the first step), and with compare=true the
same for both ways, load_peak_mb_warm/_cold and step_peak_mb_warm/_cold, load_s_*.
On CUDA a peak is torch.cuda.max_memory_reserved (what the allocator held; *_allocated_mb
beside it) and fragmentation_mb is reserved less allocated after the first step. On a
CPU there is no caching allocator: a peak is the process's RSS over its start
(sweeper.measure.memory.RssPeak), and the warm-up is expected to change nothing.
"""
from __future__ import annotations

import contextlib
import gc
import time
from typing import Any, Dict, Tuple

import torch

from sweeper.measure.memory import RssPeak
from sweeper.spec import typed_params
from workloads.playbook import models
from workloads.playbook.specs import ALLOCATOR_WARMUP as SPEC, AllocatorParams, by_device  # noqa: F401

MB = 1e6


class Peak:
    """Peak memory inside a block, in MB: CUDA reserved (and allocated) on a GPU, RSS on a CPU."""

    def __init__(self, device: torch.device):
        self.device, self.peak_mb, self.allocated_mb = device, 0.0, float("nan")

    def __enter__(self) -> "Peak":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._rss = RssPeak().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_mb = torch.cuda.max_memory_reserved(self.device) / MB
            self.allocated_mb = torch.cuda.max_memory_allocated(self.device) / MB
        else:
            self._rss.__exit__()
            self.peak_mb = self._rss.peak_mb


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()       # each way starts from an empty cache


def load(state: Dict[str, torch.Tensor], params: Dict[str, Any], device: torch.device,
         warm: bool) -> Tuple[torch.nn.Module, Dict[str, float]]:
    """The weights copied in one by one, after a warm-up block when `warm`."""
    nbytes = sum(t.numel() * t.element_size() for t in {t.data_ptr(): t for t in state.values()}.values())
    start = time.perf_counter()
    with Peak(device) as peak:
        if warm:
            block = torch.empty(nbytes, dtype=torch.uint8, device=device)
            del block                  # the caching allocator keeps it, and the weights come out of it
        moved: Dict[int, torch.Tensor] = {}
        weights = {k: moved.setdefault(t.data_ptr(), t.to(device, copy=True)) for k, t in state.items()}
        model, _ = models.build(params, device.type, where="meta")
        model.load_state_dict(weights, assign=True)
    figures = {"load_peak_mb": peak.peak_mb, "load_s": time.perf_counter() - start, "weights_mb": nbytes / MB}
    if device.type == "cuda":
        figures["load_peak_allocated_mb"] = peak.allocated_mb
    return model, figures


def train_step(model, optimizer, x: torch.Tensor, probe=None) -> None:
    phase = probe.phase if probe is not None else (lambda name: contextlib.nullcontext())
    with phase("forward"):
        loss = models.loss_of(model, x)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def first_step(model, x: torch.Tensor, device: torch.device, probe=None):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with Peak(device) as peak:
        train_step(model, optimizer, x, probe)
    figures = {"step_peak_mb": peak.peak_mb}
    if device.type == "cuda":
        figures["step_peak_allocated_mb"] = peak.allocated_mb
        stats = torch.cuda.memory_stats(device)
        figures["fragmentation_mb"] = (torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)) / MB
        figures["cuda_mallocs"] = float(stats.get("num_device_alloc", stats.get("segment.all.allocated", 0)))
    return optimizer, figures


def one_way(state, cfg, device, x, warm: bool) -> Dict[str, float]:
    """Load and one step the way the steps do not measure, then free it all."""
    model, figures = load(state, cfg.workload.params, device, warm)
    optimizer, step = first_step(model, x, device)
    del model, optimizer
    release(device)
    return {**figures, **step}


def return_freed_host_memory() -> None:
    """glibc raises its mmap threshold after large frees, and then serves the next load from
    freed heap pages that RSS already counts: the second way would look free. A fixed
    threshold keeps blocks of 64 KB and more in their own mappings, given back when freed."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024)     # M_MMAP_THRESHOLD
    except OSError:       # not glibc: the figures may then favour the way measured second
        pass


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(AllocatorParams, cfg.workload.params)
    device = torch.device(cfg.workload.device)
    kind = device.type
    batch, seq_len = int(by_device(params.batch, kind, 16, 4)), int(by_device(params.seq_len, kind, 1024, 64))
    source, vocab = models.build(cfg.workload.params, kind, where="cpu")   # the "checkpoint", in host memory
    state = source.state_dict()
    x = torch.randint(0, vocab, (batch, seq_len), device=device)
    if kind == "cpu":
        return_freed_host_memory()
    one_way(state, cfg, device, x, params.warmup)     # pays one-time costs (lazy imports, kernels) for neither way
    suffix = {True: "warm", False: "cold"}
    out: Dict[str, Any] = {"memory_kind": "cuda_reserved" if kind == "cuda" else "host_rss", "batch": batch,
                           "seq_len": seq_len}
    if params.compare:
        other = one_way(state, cfg, device, x, not params.warmup)
        out.update({f"{k}_{suffix[not params.warmup]}": v for k, v in other.items() if k != "weights_mb"})
    model, loaded = load(state, cfg.workload.params, device, params.warmup)
    optimizer = None
    while probe.more(cfg.workload.steps):
        with probe.step(items=batch * seq_len):
            if optimizer is None:
                optimizer, stepped = first_step(model, x, device, probe)
                loaded.update(stepped)
            else:
                train_step(model, optimizer, x, probe)
    out.update(loaded)
    out.update({f"{k}_{suffix[params.warmup]}": v for k, v in loaded.items() if k != "weights_mb"})
    return out
