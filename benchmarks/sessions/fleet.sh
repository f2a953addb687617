# One or more H200 (ask for nvidia-h200-x2, or x4 where lent): the fleet characterisation of one host
# (docs/overnight.md#the-fleet), under 3 minutes. One cell, the gpt2-124m bf16 training step, runs on
# every GPU of the host at once (resources.every_device=true: one Ray task per GPU, no GPU list),
# 6 repeats per GPU; the analysis compares each GPU with its peers (Mann-Whitney over repeats,
# Holm, min effect 5%) beside its SM clock, temperature and power. Prints that table last.
# FLEET_STEP="train.preset=tiny ..." is a CPU try-out.
read -ra step <<<"${FLEET_STEP:-train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16}"
session() {
  nvidia-smi --query-gpu=index,uuid,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
  run_sweep "fleet" 150 +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.every_device=true resources.isolation=gpu repeats=6 workload.steps=40 workload.warmup_steps=5 \
      wandb.enabled=false report.enabled=true results_dir=$RES
  RUN=$(newest train_step); keep "$RUN" fleet
  [ -n "$RUN" ] && cp "$RUN"/{report.md,fleet.csv} "$OUT"/ 2>/dev/null
  echo; echo "== per-GPU table ($(elapsed) s in all)"
  figures fleet "$RUN"
}
