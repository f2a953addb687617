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
same for both ways, load_peak_mb_warm/_cold and step_peak_mb_warm/_cold, load_s_*. Each
way of the comparison runs in a spawned process of its own, so each starts from an empty
caching allocator (ways_in_fresh_processes says why that matters); the trial's own figures come
from its own process's first load.
On CUDA a peak is torch.cuda.max_memory_reserved (what the allocator held; *_allocated_mb
beside it) and fragmentation_mb is reserved less allocated after the first step. On a
CPU there is no caching allocator: a peak is the process's RSS over its start
(sweeper.measure.memory.RssPeak), and the warm-up is expected to change nothing.
"""
from __future__ import annotations

import contextlib
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


def measure_way(params: Dict[str, Any], device: str, batch: int, seq_len: int, warm: bool,
                threads: int) -> Dict[str, float]:
    """One way, load and first step, in a process of its own (see ways_in_fresh_processes)."""
    torch.set_num_threads(threads)
    dev = torch.device(device)
    if dev.type == "cuda":
        if dev.index is None:      # "cuda" as the trial passes it: the one GPU this process sees first
            dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        torch.cuda.init()          # the context, outside the peaks (it is not the allocator's)
    else:
        return_freed_host_memory()
    source, vocab = models.build(params, dev.type, where="cpu")   # the "checkpoint", in host memory
    state = source.state_dict()
    x = torch.randint(0, vocab, (batch, seq_len), device=dev)
    pay_one_time_costs(params, dev.type)
    model, figures = load(state, params, dev, warm)
    _, step = first_step(model, x, dev)
    return {**figures, **step}


def pay_one_time_costs(params: Dict[str, Any], kind: str) -> None:
    """The first model built on the meta device imports and registers what it needs: seconds
    and 80 MB of host memory here, once per process, which no load peak should count."""
    models.build(params, kind, where="meta")


def ways_in_fresh_processes(params: Dict[str, Any], device: torch.device, batch: int, seq_len: int
                            ) -> Dict[bool, Dict[str, float]]:
    """Cold and warm, each measured in a new Python process, so each starts from an empty
    caching allocator (no segment cached by the other way, no counters carried over,
    cudaMalloc counts from zero) and on a CPU from a fresh heap. Measured one after the other
    in one process, the second way reuses the first one's cached segments (empty_cache cannot
    return a segment that still holds one live block), and on the H200 both ways read the same
    3,454 MB load peak. A subprocess rather than multiprocessing: spawn would re-import the
    trial's main module. On a GPU one after the other (two loads at once could run out of
    memory that one would not); on a CPU side by side, as RSS is per process."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}   # a user's model imports too

    def start(warm: bool) -> subprocess.Popen:
        args = {"params": dict(params), "device": str(device), "batch": batch, "seq_len": seq_len, "warm": warm,
                "threads": torch.get_num_threads()}
        return subprocess.Popen([sys.executable, "-m", __name__, json.dumps(args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def result(warm: bool, proc: subprocess.Popen) -> Dict[str, float]:
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:      # "out of memory" in the message makes the trial's status "oom"
            raise RuntimeError(f"allocator_warmup: the {'warm' if warm else 'cold'} way failed in its own "
                               f"process (exit {proc.returncode}): {stderr.strip()[-1500:]}")
        return json.loads(stdout.strip().splitlines()[-1])

    if device.type == "cuda":
        return {warm: result(warm, start(warm)) for warm in (False, True)}
    procs = {warm: start(warm) for warm in (False, True)}
    return {warm: result(warm, proc) for warm, proc in procs.items()}


def return_freed_host_memory() -> None:
    """glibc raises its mmap threshold after large frees, and then serves the next load from
    freed heap pages that RSS already counts: a load would look free. A fixed threshold keeps
    blocks of 64 KB and more in their own mappings, given back when freed."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024)     # M_MMAP_THRESHOLD
    except OSError:       # not glibc: host figures may read low
        pass


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(AllocatorParams, cfg.workload.params)
    device = torch.device(cfg.workload.device)
    kind = device.type
    batch, seq_len = int(by_device(params.batch, kind, 16, 4)), int(by_device(params.seq_len, kind, 1024, 64))
    suffix = {True: "warm", False: "cold"}
    out: Dict[str, Any] = {"memory_kind": "cuda_reserved" if kind == "cuda" else "host_rss", "batch": batch,
                           "seq_len": seq_len}
    if params.compare:        # both ways, each from a clean allocator in a process of its own
        for warm, way in ways_in_fresh_processes(dict(cfg.workload.params), device, batch, seq_len).items():
            out.update({f"{k}_{suffix[warm]}": v for k, v in way.items() if k != "weights_mb"})
    # the measured steps: this process's own load, its first in this process, so clean as well
    if kind == "cpu":
        return_freed_host_memory()
    source, vocab = models.build(cfg.workload.params, kind, where="cpu")
    state = source.state_dict()
    x = torch.randint(0, vocab, (batch, seq_len), device=device)
    pay_one_time_costs(cfg.workload.params, kind)
    model, loaded = load(state, cfg.workload.params, device, params.warmup)
    del source, state
    optimizer = None
    while probe.more(cfg.workload.steps):
        with probe.step(items=batch * seq_len):
            if optimizer is None:
                optimizer, stepped = first_step(model, x, device, probe)
                loaded.update(stepped)
            else:
                train_step(model, optimizer, x, probe)
    out.update(loaded)
    if not params.compare:
        out.update({f"{k}_{suffix[params.warmup]}": v for k, v in loaded.items() if k != "weights_mb"})
    return out


if __name__ == "__main__":       # one way, in a process of its own (ways_in_fresh_processes)
    import json
    import sys

    print(json.dumps(measure_way(**json.loads(sys.argv[1]))))
