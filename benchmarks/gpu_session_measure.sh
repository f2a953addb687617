#!/usr/bin/env bash
# GPU host, part 2: the probe's GPU paths (tests/test_probe_gpu.py) and its overhead on a GPT-2 step,
# the dataloader sweep with real host-to-device copies, and GPU packing. Run from the project root with .whl carried.
source "$(dirname "$0")/_gpu_host.sh"
{
  echo "== the probe's GPU paths"; timeout 150 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_probe_gpu.py
  echo "== probe overhead on a GPT-2 step"; timeout 200 python3 benchmarks/probe_overhead.py --device cuda
  echo "== dataloader sweep, one H200 per trial"
  timeout 200 python3 -m sweeper +sweep=dataloader wandb.enabled=false report.enabled=false results_dir=/tmp/results
  cp /tmp/results/dataloader/*/summary.csv "$OUT/dataloader-summary.csv"
  echo "== GPU packing"; timeout 240 python3 benchmarks/gpu_packing.py --out "$OUT/packing"
} > "$OUT/measure.log" 2>&1
grep -v "^\s*$" "$OUT/measure.log" | grep -v "authentication_token" | tail -120
