#!/usr/bin/env bash
# GPU host (two H200): the training step after the loop stopped waiting for the GPU each step.
# gpt2-124m, B=16, bf16, through `python -m sweeper` with Ray placing the trials:
#   1. eager and compiled, one GPU per trial (isolation=gpu)
#   2. ZeRO 0-3 at world size 2, native (DDP / ZeroRedundancyOptimizer / FSDP2) and DeepSpeed
#   3. the GPU-marked tests
# Run from the project root with .whl carried (Ray, Hydra, webdataset, DeepSpeed and its
# dependencies); about 7 minutes. Logs and summaries land under $OUT.
source "$(dirname "$0")/_gpu_host.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
common=(wandb.enabled=false report.enabled=false results_dir=/tmp/results train.preset=gpt2-124m
        train.micro_batch=16 train.precision=bf16)
summary() {   # the figures that matter from the newest run of sweep $1
  python3 - "$1" <<'PY'
import glob, sys
import pandas as pd
path = sorted(glob.glob(f"/tmp/results/{sys.argv[1]}/*/summary.csv"))[-1]
s = pd.read_csv(path)
cols = [c for c in ("train.backend", "train.zero_stage", "train.world_size", "train.compile", "status", "step_p50_s",
                    "step_p50_s_max_rank", "tokens_per_s", "mfu", "peak_memory_allocated_gb", "loss_final", "error_type")
        if c in s.columns]
print(s[cols].to_string(index=False))
PY
}
{
  echo "== 1. bf16 eager and compiled, one GPU per trial"
  timeout 150 python3 -m sweeper +sweep=train_step train.accum_steps=1 train.compile=false,true \
      resources.isolation=gpu "${common[@]}" | tail -4
  summary train_step
  echo "== 2. ZeRO 0-3 at world size 2, native and DeepSpeed"
  timeout 300 python3 -m sweeper +sweep=zero train.backend=native,deepspeed "${common[@]}" | tail -4
  summary zero
  echo "== 3. the GPU-marked tests"
  timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_probe_gpu.py tests/test_train_step.py \
      tests/test_train_step_gpu.py 2>&1 | tail -8
} 2>&1 | grep -v "authentication_token" | tee "$OUT/step.log"
for f in /tmp/results/*/*/summary.csv; do cp "$f" "$OUT/$(basename "$(dirname "$(dirname "$f")")")-summary.csv"; done
