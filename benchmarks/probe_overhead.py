"""What the probe adds to a training step: the same loop with the trial's full probe and without it.

    python benchmarks/probe_overhead.py                     # CPU: a small MLP training step (~2 min here)
    python benchmarks/probe_overhead.py --device cuda       # GPU: GPT-2 small, bf16 autocast, B=16, T=1024
    python benchmarks/probe_overhead.py --quick             # fewer rounds, for a smoke test
    python benchmarks/probe_overhead.py --parts both        # also the phase timing alone, without the
                                                            # sampler and memory threads

The probed loop gets what a trial gets (`Probe.for_trial` with the default ProbeConfig): five
phases (data_wait, h2d on a GPU, forward, backward, optimizer), CUDA events read back 8 steps
late, CUDA peak memory per step, the 10 Hz sampler (NVML on a GPU) and a memory reading every
10 steps. The bare loop is the same code with a probe whose step() and phase() do nothing.

Blocks alternate in ABBA / BAAB rounds, so drift falls on both sides. A probed block is one
trial's life: a fresh probe, 5 untimed warm-up steps, then --steps timed steps; a bare block
runs the same 5 + --steps steps. A block's time per step is the timed steps' wall time over
their number, with a device synchronize at both ends (a bare GPU loop has no per-step times). Each round gives one ratio, probed / bare; the table shows
the median ratio over rounds, its interquartile range and a bootstrap 95% interval of the
median. Target: at most 1.01 on the GPT-2 step. Each round also gives a ratio of the process's CPU
time (all threads, the probe's sampler included), which a shared, busy machine disturbs far less
than wall time.

Needs torch, numpy, scipy and psutil (nvidia-ml-py for NVML on a GPU); not Ray, Hydra or webdataset.
The model, the bare side's do-nothing probe, the bootstrap and the machine line are the package's
own (workloads.model.GPT, workloads.distributed.NullProbe, sweeper.analysis.bootstrap.bootstrap_ci,
sweeper.fingerprint).
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:            # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from benchmarks._common import load_average, machine_line   # noqa: E402

# -- defaults -------------------------------------------------------------------------------------
CPU_ROUNDS, CPU_STEPS = 30, 10          # MLP step ~30 ms on the shared 2-core VM: short blocks, many rounds
CPU_THREADS = 1                         # one torch thread: two on a shared 2-core VM measure contention, not the probe
GPU_ROUNDS, GPU_STEPS = 10, 20          # GPT-2 step ~45 ms on an H200: about 40 s in all
WARMUP_STEPS = 10                       # before the first round
BLOCK_WARMUP = 5                        # untimed steps at the start of every block, both sides


# -- workloads --------------------------------------------------------------------------------------
@dataclass
class Workload:
    name: str
    device: Any
    model: Any
    opt: Any
    batches: List[Any]         # (x, y) on the host; pinned on a GPU
    loss: Callable[[Any, Any], Any]
    items: int
    autocast: Callable[[], Any] = contextlib.nullcontext

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def train_step(w: Workload, probe: Any, batches: Iterator) -> None:
    with probe.step(items=w.items):
        with probe.phase("data_wait"):
            x, y = next(batches)
        if w.cuda:
            with probe.phase("h2d"):
                x, y = x.to(w.device, non_blocking=True), y.to(w.device, non_blocking=True)
        with probe.phase("forward"):
            with w.autocast():
                loss = w.loss(x, y)
        with probe.phase("backward"):
            loss.backward()
        with probe.phase("optimizer"):
            w.opt.step()
            w.opt.zero_grad(set_to_none=True)


def cycle(items: List[Any]) -> Iterator[Any]:
    while True:
        yield from items


def mlp_workload(batch: int = 64, width: int = 256, depth: int = 2) -> Workload:
    """A small MLP regression step for the CPU."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    layers: List[Any] = []
    for _ in range(depth):
        layers += [nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)]
    model = nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = [(torch.randn(batch, width), torch.randn(batch, width)) for _ in range(4)]
    return Workload(f"MLP {depth}x{width}->{4 * width}, B={batch}, fp32", torch.device("cpu"), model, opt,
                    batches, lambda x, y: nn.functional.mse_loss(model(x), y), batch)


def gpt2_workload(batch: int = 16, seq: int = 1024, device: str = "cuda") -> Workload:
    """GPT-2 small (124M) in bf16 autocast with fused AdamW: the reference GPU step, on the
    training-step workload's own model (workloads.model.GPT, the gpt2-124m preset's shape)."""
    import torch

    from sweeper.schema import TRAIN_PRESETS
    from workloads.model import GPT, ModelShape

    torch.manual_seed(0)
    shape = ModelShape(**{**TRAIN_PRESETS["gpt2-124m"], "seq_len": seq})
    model = GPT(shape).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    tokens = [torch.randint(0, shape.vocab_size, (batch, seq + 1)) for _ in range(4)]
    batches = [(t[:, :-1].contiguous().pin_memory(), t[:, 1:].contiguous().pin_memory()) for t in tokens]
    autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)   # noqa: E731
    return Workload(f"GPT-2 124M (workloads.model), B={batch}, T={seq}, bf16 autocast", torch.device(device), model, opt,
                    batches, model, batch * seq, autocast)


# -- timing -----------------------------------------------------------------------------------------
def null_probe() -> Any:
    """The bare side's probe: the package's probe API that does nothing (what ranks 1..N-1 of a
    trial get), imported here because workloads.distributed imports torch."""
    from workloads.distributed import NullProbe

    return NullProbe()


def _sync(w: Workload) -> None:
    if w.cuda:
        import torch

        torch.cuda.synchronize(w.device)


def time_block(w: Workload, probe: Any, steps: int, batches: Iterator, untimed: int = 0) -> Tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process) per step over one block, synchronised at
    both ends, after `untimed` steps. CPU time counts every thread: the probe's included."""
    for _ in range(untimed):
        train_step(w, probe, batches)
    _sync(w)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        train_step(w, probe, batches)
    _sync(w)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


# What the probed side runs: the trial's default probe, or its step timing alone.
PARTS = {"full": {}, "timing": {"sample_hz": 0, "memory_every": 0}}


def bare_block(w: Workload, steps: int, batches: Iterator, parts: str = "full") -> Tuple[float, float]:
    return time_block(w, null_probe(), steps, batches, untimed=BLOCK_WARMUP)


def probed_block(w: Workload, steps: int, batches: Iterator, parts: str = "full") -> Tuple[float, float]:
    """One block is one trial's life: a fresh probe, BLOCK_WARMUP warm-up steps (the probe's
    start-up work, such as its first memory reading, falls there, as in a trial), then the
    timed steps. The last events' readback at stop happens once per trial: not timed."""
    from sweeper.probe import Probe
    from sweeper.schema import ProbeConfig

    probe = Probe.for_trial(ProbeConfig(**PARTS[parts]), str(w.device), warmup_steps=BLOCK_WARMUP)
    with probe:
        per_step = time_block(w, probe, steps, batches, untimed=BLOCK_WARMUP)
    if probe.warnings:
        print("  probe warnings:", "; ".join(probe.warnings), file=sys.stderr)
    return per_step


def measure(w: Workload, rounds: int, steps: int, warmup: int = WARMUP_STEPS, parts: str = "full") -> Dict[str, Any]:
    """ABBA / BAAB rounds; per round one ratio probed / bare of wall time and one of CPU time."""
    batches = cycle(w.batches)
    time_block(w, null_probe(), warmup, batches)
    probed_block(w, warmup, batches, parts)                   # the probe's own first-use costs (imports)
    out: Dict[str, Any] = {"bare": [], "probed": [], "ratios": [], "cpu_bare": [], "cpu_probed": [],
                           "cpu_ratios": [], "rounds": rounds, "steps": steps, "parts": parts}
    for r in range(rounds):
        blocks: Dict[str, List[Tuple[float, float]]] = {"A": [], "B": []}
        for side in ("ABBA" if r % 2 == 0 else "BAAB"):
            blocks[side].append((bare_block if side == "A" else probed_block)(w, steps, batches, parts))
        for i, key in ((0, ""), (1, "cpu_")):
            a, b = [blk[i] for blk in blocks["A"]], [blk[i] for blk in blocks["B"]]
            out[f"{key}bare"] += a
            out[f"{key}probed"] += b
            out[f"{key}ratios"].append(sum(b) / sum(a))
    return out


def bootstrap_median_ci(values: List[float]) -> Tuple[float, float]:
    """95% percentile-bootstrap interval of the median, by the analysis's own bootstrap."""
    from sweeper.analysis.bootstrap import bootstrap_ci

    return bootstrap_ci(values, "p50", confidence=0.95, n_resamples=4000, seed=0)


def summarise(result: Dict[str, Any]) -> Dict[str, float]:
    ratios = np.asarray(result["ratios"])
    low, high = bootstrap_median_ci(result["ratios"])
    cpu_low, cpu_high = bootstrap_median_ci(result["cpu_ratios"])
    bare, probed = float(np.median(result["bare"])), float(np.median(result["probed"]))
    cpu_added = float(np.median(result["cpu_probed"]) - np.median(result["cpu_bare"]))
    return {"bare_ms": bare * 1e3, "probed_ms": probed * 1e3, "ratio": float(np.median(ratios)),
            "q25": float(np.quantile(ratios, 0.25)), "q75": float(np.quantile(ratios, 0.75)),
            "ci_low": low, "ci_high": high, "added_us": (probed - bare) * 1e6,
            "cpu_ratio": float(np.median(result["cpu_ratios"])), "cpu_ci_low": cpu_low, "cpu_ci_high": cpu_high,
            "cpu_added_us": cpu_added * 1e6}


def table_row(device: str, w: Workload, result: Dict[str, Any]) -> str:
    s = summarise(result)
    return (f"| {device} | {w.name} | {result['parts']} | {s['bare_ms']:.2f} | {s['probed_ms']:.2f} | "
            f"**{s['ratio']:.4f}** | {s['q25']:.4f}-{s['q75']:.4f} | {s['ci_low']:.4f}-{s['ci_high']:.4f} | "
            f"{s['cpu_ratio']:.4f} ({s['cpu_ci_low']:.4f}-{s['cpu_ci_high']:.4f}) | {s['cpu_added_us']:+.0f} | "
            f"{result['rounds']} x 4 x {result['steps']} |")


HEADER = ("| device | step | probe | bare ms/step | probed ms/step | wall ratio (median) | IQR | 95% CI of median | "
          "CPU-time ratio (95% CI) | added CPU us/step | rounds x blocks x steps |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def empty_step_cost_us(device: str, steps: int = 2000, repeats: int = 5) -> float:
    """Host time the trial's probe adds to a step with five phases and no work, in us: what the
    probe itself costs the step's critical path (the lowest of `repeats` medians)."""
    from sweeper.probe import Probe
    from sweeper.schema import ProbeConfig

    def per_step(probe: Any) -> float:
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            with probe.step(items=1):
                for name in ("data_wait", "h2d", "forward", "backward", "optimizer"):
                    with probe.phase(name):
                        pass
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    costs = []
    for _ in range(repeats):
        with Probe.for_trial(ProbeConfig(), device, warmup_steps=0) as probe:
            costs.append(per_step(probe) - per_step(null_probe()))
    return min(costs) * 1e6


def machine() -> str:
    """The benchmarks' machine line (from sweeper.fingerprint), with the GPU, torch's threads and the load."""
    import torch

    from sweeper.fingerprint import gpu_fields

    gpu = gpu_fields(torch)
    gpus = (f"{gpu['gpu_count']} x {gpu['gpu_name']} (driver {gpu.get('driver')}, CUDA {gpu['cuda']})"
            if gpu["gpu_count"] else "no GPU")
    return (f"{platform.node()}: {machine_line()}; {gpus}; {torch.get_num_threads()} torch threads; "
            f"load {load_average()}")


def run_device(device: str, quick: bool, rounds: Optional[int], steps: Optional[int], batch: int,
               parts: str) -> str:
    import torch

    cpu = device == "cpu"
    torch.set_num_threads(CPU_THREADS if cpu else torch.get_num_threads())
    w = mlp_workload() if cpu else gpt2_workload(batch=batch, device=device)
    default_rounds, default_steps = (CPU_ROUNDS, CPU_STEPS) if cpu else (GPU_ROUNDS, GPU_STEPS)
    rounds = rounds or (3 if quick else default_rounds)
    steps = steps or (8 if quick else default_steps)
    return table_row("CPU" if cpu else "GPU", w, measure(w, rounds, steps, parts=parts))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or both (default: cpu)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 8-step blocks")
    parser.add_argument("--rounds", type=int, help="ABBA rounds (default: 30 CPU, 10 GPU)")
    parser.add_argument("--steps", type=int, help="steps per block (default: 10 CPU, 20 GPU)")
    parser.add_argument("--batch", type=int, default=16, help="GPT-2 batch size (default 16)")
    parser.add_argument("--parts", default="full", help="full (the trial's probe), timing (phases only) "
                                                        "or both (default: full)")
    args = parser.parse_args(argv)
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    parts = ["timing", "full"] if args.parts == "both" else [args.parts]
    rows = [run_device(d, args.quick, args.rounds, args.steps, args.batch, p) for d in devices for p in parts]
    print(machine())
    print(HEADER)
    print("\n".join(rows))
    for device in devices:
        print(f"probe's own time in a step of five empty phases on {device}: "
              f"{empty_step_cost_us(device):.1f} us per step")


if __name__ == "__main__":
    main()
