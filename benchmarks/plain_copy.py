"""A plain torch copy loop, no sweeper: host-to-device GB/s, pinned and pageable, per size.
What `python -m sweeper workload=h2d_copy` must match (benchmarks/gpu_session_playbook.sh).

    python benchmarks/plain_copy.py 0.5,8,64,512 out.json

It measures what the sweeper's copy trial measures (workloads/playbook/h2d_copy.py): a
destination of exactly the size on the device, a source filled once (no first-touch faults),
`dst.copy_(src, non_blocking=pinned)` between two CUDA events, GB/s = bytes / the median of the
timed copies (3 untimed, then 20 timed). Each copy is synchronised before the next, as a plain
script does; at 0.5 MB both sides therefore include one launch gap (the sweeper's probe also
leaves the stream idle before each small copy). A file, not a shell function, so `timeout` can run it.
"""
from __future__ import annotations

import json
import statistics
import sys

import torch

WARM, TIMED = 3, 20


def gbps(size_mb: float, pinned: bool) -> float:
    n = int(size_mb * 1e6)
    src = torch.empty(n, dtype=torch.uint8, pin_memory=pinned).fill_(1)
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    for _ in range(WARM):
        dst.copy_(src, non_blocking=pinned)
    torch.cuda.synchronize()
    times = []
    for _ in range(TIMED):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src, non_blocking=pinned)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return n / statistics.median(times) / 1e9


def main() -> None:
    sizes, out_path = [float(s) for s in sys.argv[1].split(",")], sys.argv[2]
    out = {f"{size:g}/{'pinned' if pinned else 'pageable'}": gbps(size, pinned)
           for size in sizes for pinned in (True, False)}
    with open(out_path, "w") as f:
        json.dump(out, f)
    print("plain torch copy GB/s:", {k: round(v, 1) for k, v in out.items()})


if __name__ == "__main__":
    main()
