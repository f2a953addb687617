"""Where does an eager bf16 GPT-2 step spend its time? A diagnosis script for the GPU host.

Times workloads.model.GPT (gpt2-124m, B=16, T=1024, bf16 autocast, fused AdamW) in a bare
loop, no probe, under a few variations, and prints the profiler's top CUDA kernels.
    python benchmarks/gpu_eager_diag.py
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from workloads.model import GPT, ModelShape  # noqa: E402


def bench(vocab=50257, matmul="highest", steps=20, profile=False):
    torch.set_float32_matmul_precision(matmul)
    torch.manual_seed(0)
    model = GPT(ModelShape(12, 12, 768, 1024, vocab)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    x = torch.randint(0, vocab, (16, 1024), device="cuda")
    y = torch.randint(0, vocab, (16, 1024), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / steps
    if profile:
        from torch.profiler import ProfilerActivity, profile as prof

        with prof(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
    del model, opt
    torch.cuda.empty_cache()
    return per_step


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0))
    print("sdpa flash:", torch.backends.cuda.flash_sdp_enabled(), "cudnn sdpa:", torch.backends.cuda.cudnn_sdp_enabled())
    for label, kwargs in [("as workload (vocab 50257, fp32 matmul highest)", {}),
                          ("matmul precision high", {"matmul": "high"}),
                          ("vocab padded to 50304", {"vocab": 50304}),
                          ("padded + high", {"vocab": 50304, "matmul": "high"})]:
        print(f"{label:50s} {bench(**kwargs) * 1e3:7.1f} ms/step", flush=True)
    bench(profile=True, steps=3)
