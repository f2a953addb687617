#!/usr/bin/env bash
# GPU host (one H200): the profiling playbook's microbenchmarks at real sizes (docs/playbook.md).
#   1. +sweep=playbook through the Ray executor: every microbenchmark, one trial each, with the
#      "auto" sizes of a GPU (512 MB copies, GPT-2 124M in bf16 for forward timing, GPT-2 124M
#      for the allocator warm-up, its cold and warm ways each in a fresh process); the figures
#      of each trial are printed, a few to a line
#   2. the copy microbenchmark against a plain torch copy loop on the same host, pinned and
#      pageable at 0.5 / 8 / 64 / 512 MB, both moving 64 MB per timing (128 copies of 0.5 MB back
#      to back): plain loop (benchmarks/plain_copy.py) and sweeper sweep (executor=local, so the
#      8 trials share one CUDA start) interleaved, COPY_ROUNDS sweeps between plain runs; the
#      median of the sweeper's trials against the median of the plain runs, per size and kind,
#      must be within 5% (REFERENCE-NUMBERS.md: 54.3 GB/s pinned, 6.1 GB/s pageable at 512 MB)
#   3. no Ray, zygote or GPU process may be left behind
# Run from the project root with .whl carried (../shared/gpu-host/wheelhouse.sh); about 2-3
# minutes, each step under `timeout`. Logs and summaries land under $OUT; the table is printed last.
source "$(dirname "$0")/_gpu_host.sh"
START=$(date +%s)
RES=/tmp/results
common=(wandb.enabled=false report.enabled=false results_dir=$RES)
SIZES=${PLAYBOOK_SIZES:-0.5,8,64,512}     # PLAYBOOK_SIZES=0.5,8: a short try-out
COPY_ROUNDS=${COPY_ROUNDS:-8}             # sweeps of the copy sizes, each between two plain runs
COPY_PINNED=${COPY_PINNED:-true,false}    # COPY_PINNED=false: pageable only

newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }
run_sweep() {   # name cap args...
  local name=$1 cap=$2; shift 2
  echo; echo "== $name: python3 -m sweeper $* (timeout ${cap}s)"
  local t0; t0=$(date +%s.%N)
  timeout "$cap" python3 -m sweeper "$@"
  local rc=$?
  echo "-- $name: exit $rc$( ((rc == 124)) && echo ' (TIMED OUT)') in $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')") s"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv,noheader
  python3 -c "import torch, ray, hydra; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| ray', ray.__version__, '| hydra', hydra.__version__)"
  echo "cores $(nproc)"

  PB=
  if [ "${PLAYBOOK_ALL:-1}" != 0 ]; then     # PLAYBOOK_ALL=0: the copy comparison only
    run_sweep "1. playbook" 150 +sweep=playbook "${common[@]}"
    PB=$(newest playbook); echo "run folder: $PB"
    [ -n "$PB" ] && cp "$PB/summary.csv" "$OUT/playbook-summary.csv"
    leftovers "1. playbook"
  fi

  echo; echo "== 2. copy: plain torch and sweeper, interleaved ($COPY_ROUNDS sweeps between $((COPY_ROUNDS + 1)) plain runs)"
  rm -f /tmp/copy-summary-*.csv
  for r in $(seq 0 "$COPY_ROUNDS"); do
    timeout 60 python3 benchmarks/plain_copy.py "$SIZES" "$OUT/plain.json" && { cat "$OUT/plain.json"; echo; } >> "$OUT/plain-runs.jsonl"
    ((r == COPY_ROUNDS)) && break
    run_sweep "2. h2d_copy sizes, round $r" 90 workload=h2d_copy "workload.params.size_mb=$SIZES" \
        "workload.params.pinned=$COPY_PINNED" workload.params.compare=false workload.params.overlap=false executor=local "${common[@]}"
    CP=$(newest single); echo "run folder: $CP"
    [ -n "$CP" ] && cp "$CP/summary.csv" "/tmp/copy-summary-$r.csv"    # joined into one file below: few files come back
  done
  rm -f "$OUT/plain.json"
  python3 -c "import glob, pandas as pd; fs = sorted(glob.glob('/tmp/copy-summary-*.csv'));
fs and pd.concat([pd.read_csv(f) for f in fs]).to_csv('$OUT/copy-summaries.csv', index=False)"
  leftovers "2. copy"

  echo; echo "== figures ($(($(date +%s) - START)) s in all)"
  python3 - "$PB" "$OUT" <<'PY'
import json, math, statistics, sys
from pathlib import Path
import pandas as pd
playbook, out = sys.argv[1], Path(sys.argv[2])
SKIP = {"trial_id", "cell_id", "overrides", "host", "pid", "repeat", "num_cpus", "num_gpus", "threads", "is_baseline"}
if playbook:
    s = pd.read_csv(playbook.rstrip("/") + "/summary.csv")
    for _, row in s.iterrows():      # one block per workload: its own figures, a few to a line
        figures = [f"{k}={v:.4g}" for k, v in row.items()
                   if k not in SKIP and not str(k).startswith(("phase_", "workload.", "step_"))
                   and isinstance(v, (int, float)) and not isinstance(v, bool) and not pd.isna(v)]
        print(f"\n[{row['workload']}] {row['status']}  step p50 {row['step_p50_s'] * 1e3:.3g} ms")
        for i in range(0, len(figures), 4):
            print("    " + "  ".join(f"{f:30}" for f in figures[i:i + 4]).rstrip())
        if row["status"] != "ok":
            print("   ", row.get("error_type"), str(row.get("error_message"))[:300])
    alloc = s[s["workload"] == "allocator_warmup"]
    if len(alloc) and alloc.iloc[0]["status"] == "ok":
        a = alloc.iloc[0]
        print("\nallocator warm-up, each way in a fresh process (MB; mallocs a count):  cold      warm")
        for name in ("load_peak_mb", "load_peak_allocated_mb", "step_peak_mb", "fragmentation_mb", "cuda_mallocs"):
            if f"{name}_cold" in a:
                print(f"    {name:26} {a[f'{name}_cold']:>42,.0f}  {a[f'{name}_warm']:>8,.0f}")
    print()
print("reference (one H200, plain script): 54.3 GB/s pinned, 6.1 GB/s pageable at 512 MB")
runs = out / "plain-runs.jsonl"
plain = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()] if runs.exists() else []
if (out / "copy-summaries.csv").exists() and plain:
    # each memory kind and size: the median of the sweeper's trials against the median of the plain runs
    rows = pd.read_csv(out / "copy-summaries.csv")
    rows["key"] = [f"{float(z):g}/{'pinned' if p else 'pageable'}" for z, p in
                   zip(rows["size_mb"], rows["pinned_effective"])]
    # the plain loop against itself (its even-numbered runs against its odd ones): the floor a
    # 5% comparison stands on; pageable copies on a shared host can vary more than that
    print(f"{'size/memory':>14} {'sweeper GB/s':>12} {'plain GB/s':>10} {'ratio':>6}  within 5%  plain/plain  "
          f"sweeper runs | plain runs")
    worst = 0.0
    for key, g in sorted(rows.groupby("key"), key=lambda kv: (float(kv[0].split('/')[0]), kv[0])):
        ok = g[g["status"] == "ok"]["copy_gbps"].tolist()
        ref = [p[key] for p in plain if key in p]
        ratio = statistics.median(ok) / statistics.median(ref) if ok and ref else math.nan
        self_ratio = statistics.median(ref[0::2]) / statistics.median(ref[1::2]) if len(ref) >= 2 else math.nan
        worst = max(worst, abs(ratio - 1)) if not math.isnan(ratio) else math.inf
        print(f"{key:>14} {statistics.median(ok) if ok else math.nan:>12.1f} {statistics.median(ref):>10.1f} {ratio:>6.3f}  "
              f"{('yes' if abs(ratio - 1) <= 0.05 else 'NO'):9}  {self_ratio:>11.3f}  " + " ".join(f"{v:.1f}" for v in ok)
              + " | " + " ".join(f"{v:.1f}" for v in ref))
    print(f"copy microbenchmark vs plain torch loop: worst difference {worst * 100:.1f}% "
          f"({'PASS' if worst <= 0.05 else 'FAIL'}: must be within 5%)")
PY
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/playbook.log"
