"""GPU check of the training-step workload against the plain-PyTorch reference numbers.

Calls workloads.train_step.run directly with a TrialConfig and a Probe, so it needs
neither Ray nor Hydra on the GPU host: torch and numpy only (pandas, webdataset and
the rest are not imported on this path).

    python benchmarks/gpu_train_check.py                    # gpt2-124m, B=16, bf16: eager vs compiled
    python benchmarks/gpu_train_check.py --world-size 2     # + ZeRO 0-3 on 2 GPUs (NCCL)
    python benchmarks/gpu_train_check.py --phases           # per-phase times too (CUDA events, no sync)
    python benchmarks/gpu_train_check.py --device cpu --preset tiny --precision fp32   # smoke test, no GPU

Reference (REFERENCE-NUMBERS.md, plain PyTorch script, H200, one run each): 0.045 s/step eager,
0.033 s compiled; ZeRO 0/1/2/3 at world size 2: 0.046/0.049/0.058/0.067 s.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REFERENCE_S = {"eager": 0.045, "compiled": 0.033, "zero0": 0.046, "zero1": 0.049, "zero2": 0.058, "zero3": 0.067}


def cases(args):
    """(name, train.* overrides) in the order they run."""
    out = [("eager", {}), ("compiled", {"compile": True})]
    if args.world_size > 1:
        out += [(f"zero{s}", {"zero_stage": s, "world_size": args.world_size}) for s in range(4)]
    return [c for c in out if not args.only or c[0] in args.only]


def trial_config(args, overrides, phase_sync):
    from sweeper.schema import TrainConfig, TrialConfig, WorkloadConfig

    train = TrainConfig(preset=args.preset, micro_batch=args.micro_batch, precision=args.precision,
                        phase_sync=phase_sync, **overrides)
    cfg = TrialConfig(workload=WorkloadConfig(target="workloads.train_step:run", steps=args.steps,
                                              warmup_steps=args.warmup, device=args.device), train=train)
    cfg.check()
    return cfg


def make_probe(args):
    """The trial's own probe (CUDA-event timing, never a synchronize), else a host-clock one,
    which then needs train.phase_sync=true for true GPU phase times. (probe, phase_sync)"""
    from sweeper.probe import Probe

    try:
        from sweeper.schema import ProbeConfig

        return Probe.for_trial(ProbeConfig(sample_hz=0, memory_every=0), args.device, args.warmup), False
    except Exception as exc:               # an older probe, or a part that cannot be had here
        print(f"   (host-clock probe: {type(exc).__name__}: {exc})", flush=True)
        return Probe(warmup_steps=args.warmup), args.device == "cuda"


def run_case(args, name, overrides):
    import torch

    from workloads.train_step import run

    probe, phase_sync = make_probe(args)
    cfg = trial_config(args, overrides, phase_sync)
    torch.manual_seed(cfg.workload.seed)
    started = time.perf_counter()
    try:
        with probe:
            figures = run(cfg, probe)
        figures["status"] = "ok"
    except Exception as exc:               # one failed case (an OOM, say) is a row, not the end
        traceback.print_exc()
        figures = {**probe.figures, "status": f"{type(exc).__name__}: {str(exc)[:120]}"}
    figures["wall_s"] = time.perf_counter() - started
    figures["probe_step_p50_s"] = probe.summary().get("step_p50_s")
    figures["phases"] = phase_means(probe)
    figures["probe_warnings"] = list(probe.warnings)
    cleanup(torch)
    return figures


def phase_means(probe):
    rows = [r for r in probe.rows if not r["warmup"]]
    keys = sorted({k for r in rows for k in r if k.startswith("phase_")})
    return {k[6:-2]: sum(r.get(k, 0.0) for r in rows) / len(rows) for k in keys} if rows else {}


def cleanup(torch):
    gc.collect()
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def step_s(figures):
    """One rank: the probe's step p50 (the GPU's timeline). Several: the slowest rank's host p50."""
    if figures.get("world_size", 1) > 1:
        return figures.get("step_p50_s_max_rank")
    return figures.get("probe_step_p50_s") or figures.get("rank0_step_p50_s")


def peak_gb(figures):
    return figures.get("peak_memory_allocated_gb", figures.get("peak_rss_gb"))


def table(results, phases):
    lines = ["| case | step p50 s | reference s | ratio | tokens/s | MFU | peak GB | loss after N | status |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, f in results:
        s, ref = step_s(f), REFERENCE_S.get(name)
        mfu = f.get("mfu")
        lines.append("| " + " | ".join([
            name, _num(s, 4), _num(ref, 3), _num(s / ref if s and ref else None, 2),
            _num(f.get("tokens_per_s"), 0, thousands=True), f"{mfu:.1%}" if mfu else "-",
            _num(peak_gb(f), 1), _num(f.get("loss_final"), 4), f["status"]]) + " |")
    if phases:
        lines.append("")
        for name, f in results:
            lines.append(f"{name}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in f["phases"].items()))
    return "\n".join(lines)


def _num(value, digits, thousands=False):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world-size", type=int, default=1, help="also run ZeRO 0-3 with this many GPUs")
    p.add_argument("--preset", default="gpt2-124m")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--steps", type=int, default=30, help="measured steps")
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps (compilation happens here)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--phases", action="store_true", help="print the mean phase times of each case")
    p.add_argument("--only", nargs="*", help="case names to run: eager compiled zero0 zero1 zero2 zero3")
    p.add_argument("--json", help="write every figure of every case here")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    import torch

    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"torch {torch.__version__} on {where}; {args.preset}, B={args.micro_batch}, {args.precision}, "
          f"{args.steps} steps after {args.warmup} warm-up", flush=True)
    results = []
    for name, overrides in cases(args):
        print(f"-- {name} {overrides}", flush=True)
        results.append((name, run_case(args, name, overrides)))
        print(f"   {results[-1][1]['status']}: step p50 {_num(step_s(results[-1][1]), 4)} s", flush=True)
    print()
    print(table(results, args.phases))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(results), indent=2, default=str))
    return 0 if all(f["status"] == "ok" for _, f in results) else 1


if __name__ == "__main__":
    sys.exit(main())
