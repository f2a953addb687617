#!/usr/bin/env bash
# GPU host, part 2: eager-step diagnosis, the probe's GPU paths and overhead, the dataloader
# sweep with real host-to-device copies, and GPU packing. Run from the project root with .whl carried.
source "$(dirname "$0")/_gpu_host.sh"
{
  echo "== eager bf16 step diagnosis"; timeout 150 python3 benchmarks/gpu_eager_diag.py
  echo "== probe GPU check"; timeout 200 python3 benchmarks/gpu_probe_check.py --json "$OUT/gpu_probe_check.json"
  echo "== dataloader sweep, one H200 per trial"
  timeout 200 python3 -m sweeper +sweep=dataloader wandb.enabled=false report.enabled=false results_dir=/tmp/results
  cp /tmp/results/dataloader/*/summary.csv "$OUT/dataloader-summary.csv"
  echo "== GPU packing"; timeout 240 python3 benchmarks/gpu_packing.py --out "$OUT/packing"
} > "$OUT/measure.log" 2>&1
grep -v "^\s*$" "$OUT/measure.log" | grep -v "authentication_token" | tail -120
