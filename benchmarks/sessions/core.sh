# Two H200: the core on real GPUs, about 6 minutes (SESSION_BUDGET_S=430 caps it).
#   1. the DataLoader sweep, one GPU per trial: pin_memory must be effective (pinned H2D copies)
#   2. gpt2-124m bf16 eager training step, one GPU (docs/benchmarks.md: 43.7 ms)
#   3. ZeRO 0-3 at world size 2 (docs/benchmarks.md: 46.5 / 49.7 / 76.0 / 95.4 ms)
#   4. the same step as 2 with executor=local (in the driver's process)
#   5. the GPU-marked tests, with the containment and isolation tests beside them (CPU only)
#   6. after each: no Ray, zygote or watchdog process and no GPU process left behind
# CORE_STEP="train.preset=tiny ..." is a CPU try-out of the training steps.
DEADLINE=$((START + ${SESSION_BUDGET_S:-430}))
common=(wandb.enabled=false results_dir=$RES)
read -ra step <<<"${CORE_STEP:-train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16}"

session() {
  machine; leftovers "start"
  run_sweep "1. dataloader" 110 +sweep=dataloader data.num_workers=2,8 data.prefetch_factor=2 data.pin_memory=false,true \
      repeats=3 workload.steps=50 resources.isolation=gpu "${common[@]}"
  DL=$(newest dataloader); keep "$DL" dataloader; leftovers "1. dataloader"
  run_sweep "2. train_step (ray)" 100 +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.isolation=gpu report.enabled=false "${common[@]}"
  TS=$(newest train_step); keep "$TS" train_step-ray; leftovers "2. train_step (ray)"
  run_sweep "3. zero" 150 +sweep=zero "${step[@]}" report.enabled=false "${common[@]}"
  ZR=$(newest zero); keep "$ZR" zero; leftovers "3. zero"
  run_sweep "4. train_step (local)" 80 +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.isolation=gpu executor=local report.enabled=false "${common[@]}"
  TL=$(newest train_step); [ "$TL" = "$TS" ] && TL=""; keep "$TL" train_step-local; leftovers "4. train_step (local)"

  echo; echo "== 5. tests: GPU-marked, and containment + isolation beside them"
  GPU_TESTS_LOG=/dev/null gpu_tests 150 tests/test_containment.py tests/test_isolation.py --durations=5 \
      >"$OUT/pytest-containment.log" 2>&1 &
  local cpid=$!
  GPU_TESTS_LOG=/dev/null gpu_tests 190 -m gpu -s tests/ >"$OUT/pytest-gpu.log" 2>&1
  grep -E "step p50|passed|failed|error|Error|-- tests" "$OUT/pytest-gpu.log" | tail -25
  wait "$cpid"; tail -14 "$OUT/pytest-containment.log"
  leftovers "5. tests"

  echo; echo "== figures ($(elapsed) s in all; pinned copies: pin_memory_effective in $OUT/dataloader-summary.csv)"
  figures cells "$DL" "$TS" "$ZR" "$TL"
  echo "docs/benchmarks.md: eager bf16 43.7 ms, 373k tok/s, 32.2% MFU, 15.58 GB; ZeRO 0-3 native 46.5 / 49.7 / 76.0 / 95.4 ms"
}
