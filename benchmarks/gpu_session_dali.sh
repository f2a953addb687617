#!/usr/bin/env bash
# GPU host (one H200): NVIDIA DALI through the sweeper against a plain DALI script, and
# +sweep=loaders on images.
#   (a) a plain DALI script (benchmarks/dali_plain.py: mixed JPEG decode, 8 threads, 2,048 JPEGs
#       of 375x500 at quality 90, random-resized-crop to 224x224 and flip, batch 64) and the same
#       setting through `python -m sweeper` on the same host, minutes apart: images/s of each and
#       their ratio, which must be within 5% (reference, ../shared/REFERENCE-NUMBERS.md: 5,068 images/s)
#   (b) +sweep=loaders on real-size images: the DataLoader (8 workers, Pillow) against DALI
#       (8 threads, mixed decode), with the verdict table
# About 3-4 minutes in all; logs and summaries under $OUT, a short table printed last.
#
# How to launch it. DALI is too big for one command, so it comes in parts (../shared/gpu-host/
# bigwheels.sh); this script is the LAST command of that series. From the project root, here:
#   ../shared/gpu-host/wheelhouse.sh                  # .whl/: Ray, Hydra, OmegaConf, webdataset (once)
#   ../shared/gpu-host/bigwheels.sh                   # .carry0 ... .carryN: DALI and its libraries
# then, back to back (a host is given back 30 s after a command ends):
#   for each part k < N, carrying [".carryK"]:   mkdir -p /tmp/acc && cp .carryK/* /tmp/acc/
#   last, carrying [".carryN", ".whl"]:          cp .carryN/* /tmp/acc/ && bash benchmarks/gpu_session_dali.sh
# This script joins the parts in /tmp/acc and installs them with .whl into /tmp/site. If /tmp/acc
# is missing or short (a fresh host), it says so and stops: start again from part 0.
set -uo pipefail
export PYTHONUNBUFFERED=1 SWEEPER_CACHE=/tmp/shards
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd "$(dirname "$0")/.."
START=$(date +%s)

if ! ls /tmp/acc/*.whl >/dev/null 2>&1; then
  if ! ls /tmp/acc/part* >/dev/null 2>&1; then
    echo "no DALI parts in /tmp/acc: a fresh host; send the bigwheels parts again from part 0"; exit 3
  fi
  cat /tmp/acc/part* | tar x -C /tmp/acc || { echo "the DALI parts do not join: some are missing; start again from part 0"; exit 3; }
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl /tmp/acc/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
RES=/tmp/results
common=(wandb.enabled=false results_dir=$RES)
# the reference setting, in the sweeper's words
real=(data.kind=images data.num_shards=8 data.samples_per_shard=256 data.images.height=375 data.images.width=500
      data.images.quality=90 data.images.crop_size=224 data.batch_size=64)
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }

{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, nvidia.dali as d, ray, hydra; print('torch', torch.__version__, '| dali', d.__version__, '| ray', ray.__version__, '| hydra', hydra.__version__)"
  echo "cores $(nproc)"

  echo; echo "== (a1) plain DALI script: mixed decode, 8 threads, 3 fresh pipelines (makes the shards and indexes first)"
  timeout 150 python3 benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 3 --warmup 5 --steps 100 \
    | tee "$OUT/plain.json"

  echo; echo "== (a2) the same through python -m sweeper (3 trials, 5 warm-up + 100 measured steps each)"
  timeout 150 python3 -m sweeper sweep.name=dali_match "${real[@]}" data.loader=dali data.dali.num_threads=8 \
    data.dali.decoder=mixed repeats=3 workload.warmup_steps=5 workload.steps=100 resources.isolation=gpu \
    report.enabled=false "${common[@]}"
  echo "-- exit $?"
  MATCH=$(newest dali_match)

  echo; echo "== (b) +sweep=loaders on images: DataLoader (8 workers, Pillow) against DALI (8 threads, mixed)"
  timeout 200 python3 -m sweeper +sweep=loaders "${real[@]}" data.num_workers=8 data.dali.num_threads=8 \
    data.dali.decoder=mixed workload.steps=50 "${common[@]}" 2>&1 | tee "$OUT/loaders.out"
  echo "-- exit ${PIPESTATUS[0]}"
  LOADERS=$(newest loaders)

  for pair in "dali_match:$MATCH" "loaders:$LOADERS"; do
    [ -n "${pair#*:}" ] && cp "${pair#*:}/summary.csv" "$OUT/${pair%%:*}-summary.csv"
  done
  echo; echo "== figures ($(($(date +%s) - START)) s in all)"
  python3 - "$OUT/plain.json" "$MATCH" "$LOADERS" <<'PY'
import json, sys
import pandas as pd
plain_path, match, loaders = sys.argv[1:]
try:
    plain = json.loads(open(plain_path).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    plain = {}
swept = pd.read_csv(match.rstrip("/") + "/summary.csv") if match else pd.DataFrame()
ok = swept[swept["status"] == "ok"] if len(swept) else swept
through = ok["items_per_s"].median() if len(ok) else float("nan")
p = plain.get("images_per_s", float("nan"))
print(f"(a) plain DALI script   {p:9,.0f} images/s (first epoch {plain.get('first_epoch_images_per_s', float('nan')):,.0f}; reference 5,068)")
print(f"    through the sweeper {through:9,.0f} images/s ({len(ok)} ok trials; DALI RSS peak "
      f"{ok['dali_mem_peak_mb'].median() if len(ok) else float('nan'):,.0f} MB, after release "
      f"{ok['dali_mem_after_release_mb'].median() if len(ok) else float('nan'):,.0f} MB)")
ratio = through / p if p == p and p else float("nan")
print(f"    ratio sweeper / plain {ratio:.3f}: {'WITHIN 5%' if abs(ratio - 1) <= 0.05 else 'NOT within 5%'}")
if loaders:
    s = pd.read_csv(loaders.rstrip("/") + "/summary.csv")
    for loader, g in s.groupby("data.loader"):
        good = g[g["status"] == "ok"]
        print(f"(b) loaders  {loader:6} {len(good)}/{len(g)} ok  {good['items_per_s'].median():9,.0f} images/s  "
              f"first batch {good['time_to_first_batch_s'].median():.2f} s")
PY
  echo; echo "(b) the sweeper's verdicts:"
  sed -n '/^verdicts against the baseline:/,/^report:/p' "$OUT/loaders.out"
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/dali.log"
