# Two H200: gpt2-124m, B=16, bf16 through `python -m sweeper` with Ray placing the trials, about 7 minutes:
#   1. eager and compiled, one GPU per trial (isolation=gpu)
#   2. ZeRO 0-3 at world size 2, native (DDP / ZeroRedundancyOptimizer / FSDP2) and DeepSpeed
#   3. the GPU-marked tests
# .whl must also hold DeepSpeed and its dependencies.
common=(wandb.enabled=false report.enabled=false results_dir=$RES train.preset=gpt2-124m train.micro_batch=16
        train.precision=bf16)
session() {
  machine
  run_sweep "1. bf16 eager and compiled, one GPU per trial" 150 +sweep=train_step train.accum_steps=1 \
      train.compile=false,true resources.isolation=gpu "${common[@]}" | tail -4
  run_sweep "2. ZeRO 0-3 at world size 2, native and DeepSpeed" 300 +sweep=zero train.backend=native,deepspeed \
      "${common[@]}" | tail -4
  echo "== 3. the GPU-marked tests"
  gpu_tests 400 -m gpu tests/test_probe_gpu.py tests/test_train_step.py tests/test_train_step_gpu.py 2>&1 | tail -8
  keep "$(newest train_step)" train_step; keep "$(newest zero)" zero
  figures cells "$(newest train_step)" "$(newest zero)"
}
