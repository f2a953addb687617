# One or two H200: train.backend=deepspeed for real, a few minutes. gpt2-124m, bf16, B=16, ZeRO 0-3 at
# world size 1 and 2 through `python -m sweeper` (about 8 trials). .whl must hold DeepSpeed (a
# pure-python wheel, no ops compiled: torch's AdamW is the optimizer) and its dependencies.
#   WITH_NATIVE=1   adds train.backend=native to the grid, for the loss and speed side by side
RES=/tmp/results-deepspeed; rm -rf "$RES"
session() {
  machine
  python3 -c "import deepspeed; print('deepspeed', deepspeed.__version__)" 2>&1 | tail -1
  local backends=deepspeed; [ "${WITH_NATIVE:-0}" = 1 ] && backends=native,deepspeed
  run_sweep "DeepSpeed ZeRO 0-3 at world size 1 and 2" 540 +sweep=zero train.backend=$backends \
      train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16 train.zero_stage=0,1,2,3 \
      train.world_size=1,2 wandb.enabled=false results_dir="$RES" > "$OUT/deepspeed-sweep.log" 2>&1
  grep -v "^\s*$" "$OUT/deepspeed-sweep.log" | tail -60
  cp -r "$RES" "$OUT/results-deepspeed" 2>/dev/null
  figures cells "$(newest zero)" --columns p50 tokens_per_s mfu peak_memory_allocated_gb loss_final
}
