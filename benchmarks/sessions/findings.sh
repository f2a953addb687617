# Two H200: the analysis' findings on real GPUs (docs/analysis.md), about 3 minutes.
#   1. gpt2-124m bf16 training step reading token shards (data_source=shards, 2 workers) at world
#      size 1 and 2, priced at $3.50 per H200-hour: the overlap projection, $ per million tokens,
#      scaling efficiency, any warnings, and a recommendation minimising cost under 40 GB
#   2. the DataLoader with pinned memory, 1 and 8 workers over 4 shards: the `shards` warning must
#      fire for 8 workers and stay quiet for 1; $ per million samples
common=(wandb.enabled=false results_dir=$RES "+cost.gpu_hour_usd={H200:3.5}")
FINDINGS=(items_per_s tokens_per_s overlap_data_s overlap_compute_s overlap_ideal_s overlap_saving usd_per_hour
          usd_per_m_tokens usd_per_m_samples items_per_s_per_rank scaling_efficiency pitfalls)
session() {
  machine
  run_sweep "1. train_step, shards, world size 1 and 2" 240 +sweep=train_step train.preset=gpt2-124m \
      train.micro_batch=16 train.precision=bf16 train.data_source=shards data.seq_len=1024 data.num_workers=2 \
      data.pin_memory=true train.world_size=1,2 train.accum_steps=1 train.compile=false workload.steps=30 repeats=2 \
      analysis.objective=cost analysis.max_memory_gb=40 "${common[@]}"
  TS=$(newest train_step)
  run_sweep "2. dataloader, pinned, 1 and 8 workers over 4 shards" 150 +sweep=dataloader data.num_workers=1,8 \
      data.prefetch_factor=2 data.pin_memory=true data.num_shards=4 workload.steps=50 repeats=2 \
      resources.isolation=gpu "${common[@]}"
  DL=$(newest dataloader)
  echo; echo "== findings (the analysis' own columns)"
  figures cells "$TS" "$DL" --columns "${FINDINGS[@]}"
}
