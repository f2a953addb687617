# H200s: a user's own model in the training-step engine, through `python -m sweeper`, 3-4 minutes:
#   1. examples/user_model/nanogpt_style.py:gpt (GPT-2 124M shape) against the preset gpt2-124m: bf16,
#      B=16, one GPU a trial, 3 repeats each, interleaved; the ratio of their step p50 must be within 3%
#   2. the user model through ZeRO 0-3 at the largest world size these GPUs allow (1, 2 or 4), next to
#      the preset at the same stages (losses should agree; step times side by side)
RES=/tmp/results-usermodel; rm -rf "$RES"
export PYTHONPATH="$PWD/examples/user_model${PYTHONPATH:+:$PYTHONPATH}"
GPUS=$(nvidia-smi -L | wc -l)
WORLD=1; ((GPUS >= 2)) && WORLD=2; ((GPUS >= 4)) && WORLD=4
common=(wandb.enabled=false report.enabled=false results_dir=$RES train.preset=gpt2-124m train.micro_batch=16
        train.precision=bf16 train.accum_steps=1)
session() {
  machine; echo "world size for ZeRO: $WORLD ($GPUS GPUs)"
  run_sweep "1. user model vs preset, 3 repeats" 200 +sweep=train_step 'train.model=null,nanogpt_style:gpt' repeats=3 \
      workload.steps=30 workload.warmup_steps=5 resources.isolation=gpu "${common[@]}"
  run_sweep "2. ZeRO 0-3 at world size $WORLD, user model and preset" 240 +sweep=zero \
      'train.model=null,nanogpt_style:gpt' train.zero_stage=0,1,2,3 train.world_size=$WORLD workload.steps=15 \
      workload.warmup_steps=3 "${common[@]}"
  cp -r "$RES" "$OUT/" 2>/dev/null
  echo; echo "== 1. step time, user model against the preset (one H200 a trial)"
  figures pair "$(newest train_step)" --axis train.model --a nanogpt_style:gpt --b null --metric p50 --within 0.03
  figures cells "$(newest train_step)" --columns p50 tokens_per_s mfu loss_final
  echo; echo "== 2. ZeRO 0-3, world size $WORLD"
  figures cells "$(newest zero)" --columns p50 tokens_per_s mfu peak_memory_allocated_gb loss_final
}
