#!/usr/bin/env bash
# GPU host (two H200): the analysis' findings on real GPUs (docs/analysis.md):
#   1. gpt2-124m bf16 training step reading token shards (data_source=shards, 2 workers) at world
#      size 1 and 2, priced at $3.50 per H200-hour: the overlap projection (data_wait + h2d against
#      forward + backward + optimizer), $ per million tokens, scaling efficiency, any warnings, and
#      a recommendation asked to minimise cost under a 40 GB memory limit
#   2. the DataLoader with pinned memory on a GPU, 1 and 8 workers over 4 shards: the `shards`
#      warning must fire for 8 workers and stay quiet for 1; $ per million samples
# Run from the project root with .whl carried (../shared/gpu-host/wheelhouse.sh); about 3 minutes.
# Logs under $OUT; the findings table is printed last.
source "$(dirname "$0")/_gpu_host.sh"
RES=/tmp/results
common=(wandb.enabled=false results_dir=$RES "+cost.gpu_hour_usd={H200:3.5}")
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }

{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  echo "== 1. train_step, shards, world size 1 and 2"
  timeout 240 python3 -m sweeper +sweep=train_step train.preset=gpt2-124m train.micro_batch=16 \
      train.precision=bf16 train.data_source=shards data.seq_len=1024 data.num_workers=2 data.pin_memory=true \
      train.world_size=1,2 train.accum_steps=1 train.compile=false workload.steps=30 repeats=2 \
      analysis.objective=cost analysis.max_memory_gb=40 "${common[@]}"
  echo "-- exit $?"
  TS=$(newest train_step)
  echo "== 2. dataloader, pinned, 1 and 8 workers over 4 shards"
  timeout 150 python3 -m sweeper +sweep=dataloader data.num_workers=1,8 data.prefetch_factor=2 \
      data.pin_memory=true data.num_shards=4 workload.steps=50 repeats=2 resources.isolation=gpu "${common[@]}"
  echo "-- exit $?"
  DL=$(newest dataloader)
  echo; echo "== findings (cells.parquet: the analysis' own columns)"
  python3 - "$TS" "$DL" <<'PY'
import sys
import pandas as pd
pd.set_option("display.width", 250)
for path in sys.argv[1:]:
    if not path:
        print("(no run folder)"); continue
    cells = pd.read_parquet(path.rstrip("/") + "/cells.parquet")
    cols = [c for c in cells.columns if c.startswith(("train.world_size", "data.num_workers"))]
    cols += [c for c in ("items_per_s", "tokens_per_s", "overlap_data_s", "overlap_compute_s", "overlap_ideal_s",
                         "overlap_saving", "usd_per_hour", "usd_per_m_tokens", "usd_per_m_samples",
                         "items_per_s_per_rank", "scaling_efficiency", "pitfalls") if c in cells.columns]
    print(path); print(cells[cols].to_string(index=False)); print()
PY
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/findings.log"
