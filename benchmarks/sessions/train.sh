# Two H200: the earlier full training-step session, about 8 minutes: precision x compile (gpt2-124m,
# one GPU per trial), ZeRO 0-3 at world size 2, a real CUDA out-of-memory trial retried with half the
# micro-batch (WITH_OOM=0 skips it), then the GPU-marked tests.
common=(wandb.enabled=false results_dir=$RES)
session() {
  machine
  run_sweep "precision x compile, gpt2-124m, one GPU per trial" 420 +sweep=train_step train.preset=gpt2-124m \
      train.micro_batch=16 train.precision=fp32,tf32,bf16 train.accum_steps=1 train.compile=false,true \
      resources.isolation=gpu "${common[@]}"
  keep "$(newest train_step)" train_step; figures cells "$(newest train_step)"
  run_sweep "ZeRO 0-3 at world size 2" 300 +sweep=zero train.preset=gpt2-124m train.micro_batch=16 \
      train.precision=bf16 train.world_size=2 "${common[@]}"
  keep "$(newest zero)" zero; figures cells "$(newest zero)"
  if [ "${WITH_OOM:-1}" = 1 ]; then
    run_sweep "a real CUDA out-of-memory trial, retried with half the micro-batch" 240 +sweep=train_step \
        train.preset=gpt2-124m train.micro_batch=1024 train.precision=bf16 train.accum_steps=1 workload.steps=3 \
        workload.warmup_steps=1 resources.on_oom=halve "${common[@]}"
  fi
  echo "== the GPU-marked tests (gpt2-124m B=16 bf16 eager/compiled, ZeRO 0-3 at world size 2)"
  gpu_tests 400 -s -m gpu tests/test_probe_gpu.py tests/test_train_step.py tests/test_train_step_gpu.py
}
