#!/usr/bin/env bash
# GPU host, part 1: the training-step workload on two H200s through `python -m sweeper`, then directly
# (tests/test_train_step_gpu.py, among the GPU-marked tests).
# Run from the project root with .whl carried (../shared/gpu-host/wheelhouse.sh builds it).
source "$(dirname "$0")/_gpu_host.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
common=(wandb.enabled=false results_dir=/tmp/results)
{
  echo "== sweeper: precision x compile, gpt2-124m, one GPU per trial"
  timeout 420 python3 -m sweeper +sweep=train_step train.preset=gpt2-124m train.micro_batch=16 \
      train.precision=fp32,tf32,bf16 train.accum_steps=1 train.compile=false,true resources.isolation=gpu "${common[@]}"
  echo "== sweeper: ZeRO 0-3 at world size 2"
  timeout 300 python3 -m sweeper +sweep=zero train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16 \
      train.world_size=2 "${common[@]}"
  if [ "${WITH_OOM:-1}" = 1 ]; then
    echo "== sweeper: a real CUDA out-of-memory trial, retried with half the micro-batch"
    timeout 240 python3 -m sweeper +sweep=train_step train.preset=gpt2-124m train.micro_batch=1024 train.precision=bf16 \
        train.accum_steps=1 workload.steps=3 workload.warmup_steps=1 resources.on_oom=halve "${common[@]}"
  fi
  echo "== the GPU-marked tests (the workload called directly: gpt2-124m B=16 bf16 eager/compiled, ZeRO 0-3 at world size 2)"
  timeout 400 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_probe_gpu.py tests/test_train_step.py \
      tests/test_train_step_gpu.py
} 2>&1 | tee "$OUT/train.log" | grep -v "^\s*$"
for f in /tmp/results/*/*/summary.csv; do cp "$f" "$OUT/$(basename "$(dirname "$(dirname "$f")")")-summary.csv"; done
