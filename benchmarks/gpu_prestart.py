"""What a second process starting CUDA on the same GPU costs a trial that is running there.

Packing short GPU trials tighter (issue #24) would mean making the next trial's process and its
CUDA context while the current trial runs its measured steps. This measures what that start costs
the running trial's steps, before anything is built on it. One GPU, two workloads (`matmul`: bf16
matrix products, compute-bound; `copy`: a large device-to-device copy, memory-bound), each step
timed with a synchronize. Every round runs the workload twice, in random order:

  control   the steps alone
  spare     the same steps, and at SPAWN_AT s a second process starts: it imports torch, makes its
            CUDA context on the same GPU (`torch.zeros(1, device="cuda")`), makes its cuBLAS handle
            (one small matmul) and then waits, holding the context, until the steps end

It prints, per workload, the median step time in three windows of the spare run against the same
windows of the control run: while the second process imports torch (CPU only), while it makes
its context and handle (the part a prestart during measured steps would add), and while it waits
holding them; how long the second process took from its start to ready (what a prestart
would take off the gap between two trials), and how long its exit took, context and all.

    python benchmarks/gpu_prestart.py                  # 5 rounds, about 2 minutes on one H200
    python benchmarks/gpu_prestart.py --rounds 2 --seconds 4
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Sequence, Tuple

SPAWN_AT = 1.0                         # s into the steps at which the second process starts
SPARE = r"""
import sys, time
t = {"start": time.time()}
import torch
t["imported"] = time.time()
torch.zeros(1, device="cuda")
t["context"] = time.time()
a = torch.ones(256, 256, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()
t["ready"] = time.time()
print(__import__("json").dumps(t), flush=True)
sys.stdin.read()                       # hold the context until told to go
"""


def make_step(torch, kind: str):
    if kind == "matmul":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

        def step():
            for _ in range(8):
                a @ b
    else:
        src = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)

        def step():
            for _ in range(8):
                dst.copy_(src)
    return step


def run_steps(torch, step, seconds: float, spare: bool) -> Tuple[List[Tuple[float, float]], Dict[str, float]]:
    """(start, end) of each step for `seconds`; with `spare`, the second process's time stamps."""
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times, proc, marks, gone = [], None, {}, 0.0
    began = time.time()
    while time.time() - began < seconds:
        if spare and proc is None and time.time() - began >= SPAWN_AT:
            proc = subprocess.Popen([sys.executable, "-c", SPARE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True)
        t0 = time.time()
        step()
        torch.cuda.synchronize()
        times.append((t0, time.time()))
    if proc is not None:
        marks = json.loads(proc.stdout.readline())
        told = time.time()
        proc.stdin.close()
        proc.wait()
        gone = time.time() - told
    return [(s - began, e - began) for s, e in times], {**{k: v - began for k, v in marks.items()}, "exit": gone}


def window(times: Sequence[Tuple[float, float]], low: float, high: float) -> List[float]:
    """Durations of the steps that overlap [low, high)."""
    return [e - s for s, e in times if e > low and s < high]


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="steps per run (the spare must be ready in it)")
    args = parser.parse_args(list(argv))
    import torch

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.rounds} rounds of {args.seconds} s")
    print("\n| workload | window (spare run) | steps (spare / control) | spare run: median / mean / max step, ms | control: median / mean / max, ms | ratio of medians / means |\n|---|---|---|---|---|---|")
    rng = random.Random(0)
    for kind in ("matmul", "copy"):
        step = make_step(torch, kind)
        rows: Dict[str, Tuple[List[float], List[float]]] = {
            name: ([], []) for name in ("importing torch", "context and cuBLAS", "holding them")}
        ready = []
        for _ in range(args.rounds):
            order = [False, True]
            rng.shuffle(order)
            runs = {spare: run_steps(torch, step, args.seconds, spare) for spare in order}
            (control, _), (spared, marks) = runs[False], runs[True]
            spans = {"importing torch": (marks["start"], marks["imported"]),
                     "context and cuBLAS": (marks["imported"], marks["ready"]),
                     "holding them": (marks["ready"], args.seconds)}
            for name, (low, high) in spans.items():
                rows[name][0].extend(window(spared, low, high))
                rows[name][1].extend(window(control, low, high))
            ready.append((marks["ready"] - marks["start"], marks["ready"] - marks["imported"], marks["exit"]))
        for name, (mine, theirs) in rows.items():
            m, c = statistics.median(mine), statistics.median(theirs)
            print(f"| {kind} | {name} | {len(mine)} / {len(theirs)} | {m * 1e3:.3f} / {statistics.mean(mine) * 1e3:.3f} / "
                  f"{max(mine) * 1e3:.3f} | {c * 1e3:.3f} / {statistics.mean(theirs) * 1e3:.3f} / {max(theirs) * 1e3:.3f} "
                  f"| {m / c:.4f} / {statistics.mean(mine) / statistics.mean(theirs):.4f} |")
        whole, ctx, gone = (statistics.median(r[i] for r in ready) for i in range(3))
        print(f"| {kind} | the second process: start to ready {whole:.2f} s, of which context and cuBLAS "
              f"{ctx:.2f} s; its exit, holding them, {gone:.2f} s | | | | |")
        del step
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
