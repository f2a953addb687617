"""A plain torch copy loop, no sweeper: host-to-device GB/s, pinned and pageable, per size.
What `python -m sweeper workload=h2d_copy` must match (benchmarks/gpu_session.sh playbook).

    python benchmarks/plain_copy.py 0.5,8,64,512 out.json

It measures what the sweeper's copy trial measures (workloads/playbook/h2d_copy.py): a
destination of exactly the size on the device, a source filled once (no first-touch faults),
enough `dst.copy_(src, non_blocking=pinned)` back to back to move 64 MB (one copy of 512 MB,
128 of 0.5 MB) between two CUDA events, GB/s = bytes / the median of the timings (3 untimed,
then 20 timed, each synchronised before the next). A file, not a shell function, so
`timeout` can run it.
"""
from __future__ import annotations

import json
import math
import statistics
import sys

import torch

WARM, TIMED = 3, 20
MB_PER_TIMING = 64


def gbps(size_mb: float, pinned: bool) -> float:
    n = int(size_mb * 1e6)
    src = torch.empty(n, dtype=torch.uint8, pin_memory=pinned).fill_(1)
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    copies = max(1, math.ceil(MB_PER_TIMING / size_mb))
    for _ in range(WARM):
        dst.copy_(src, non_blocking=pinned)
    torch.cuda.synchronize()
    times = []
    for _ in range(TIMED):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(copies):
            dst.copy_(src, non_blocking=pinned)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return copies * n / statistics.median(times) / 1e9


def main() -> None:
    sizes, out_path = [float(s) for s in sys.argv[1].split(",")], sys.argv[2]
    out = {f"{size:g}/{'pinned' if pinned else 'pageable'}": gbps(size, pinned)
           for size in sizes for pinned in (True, False)}
    with open(out_path, "w") as f:
        json.dump(out, f)
    print("plain torch copy GB/s:", {k: round(v, 1) for k, v in out.items()})


if __name__ == "__main__":
    main()
