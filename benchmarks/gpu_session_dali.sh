#!/usr/bin/env bash
# GPU host (one H200): NVIDIA DALI through the sweeper against a plain DALI script, and
# +sweep=loaders on images.
#   (a) a plain DALI script (benchmarks/dali_plain.py: mixed JPEG decode, 8 threads, 2,048 JPEGs
#       of 375x500 at quality 90, random-resized-crop to 224x224 and flip, batch 64) and the same
#       setting through `python -m sweeper`, INTERLEAVED: $ROUNDS rounds, each a plain run (2 fresh
#       pipelines), a sweep through Ray (2 trials) and a sweep with executor=local (2 trials, the
#       same process: no Ray start-up beside it), the order alternating by round so host drift
#       falls on all. Each measures 400 batches after the same warm-up (the plain script's first
#       epoch of 32 batches + 5 = the sweeper's 37 warm-up steps). Medians over runs; the ratio
#       sweeper (Ray) / plain must be within 5% (reference, ../shared/REFERENCE-NUMBERS.md: 5,068 images/s)
#   (b) +sweep=loaders on real-size images: the DataLoader (8 workers, Pillow) against DALI
#       (8 threads, mixed decode), with the verdict table
# About 3 minutes in all (DALI_LOADERS=0 skips (b), ~40 s); logs and summaries under $OUT, a short table printed last.
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
RES=/tmp/results/dali-$START      # this session's runs only
common=(wandb.enabled=false results_dir=$RES)
# the reference setting, in the sweeper's words, on the very shard files the plain script reads
real=(data.cache_dir=$SWEEPER_CACHE data.kind=images data.num_shards=8 data.samples_per_shard=256 data.images.height=375 data.images.width=500
      data.images.quality=90 data.images.crop_size=224 data.batch_size=64)
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }

ROUNDS=${DALI_ROUNDS:-3}; STEPS=${DALI_STEPS:-400}; WARM=37     # 37 = the plain script's first epoch (32) + 5
match=("${real[@]}" data.loader=dali data.dali.num_threads=8 data.dali.decoder=mixed repeats=2
       workload.warmup_steps=$WARM workload.steps=$STEPS resources.isolation=gpu report.enabled=false "${common[@]}")
plain_run() { timeout 120 python3 benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 2 --warmup 5 \
                --steps "$STEPS" | tail -1 > "$OUT/plain-$1.json"; echo "-- plain round $1: $(cut -c1-200 "$OUT/plain-$1.json")"; }
ray_run()   { timeout 150 python3 -m sweeper sweep.name=dali_match "${match[@]}" | grep -E '^\[|^results:'; echo "-- exit ${PIPESTATUS[0]}"; }
local_run() { timeout 150 python3 -m sweeper sweep.name=dali_match_local executor=local "${match[@]}" \
                | grep -E '^\[|^results:'; echo "-- exit ${PIPESTATUS[0]}"; }

{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, nvidia.dali as d, ray, hydra; print('torch', torch.__version__, '| dali', d.__version__, '| ray', ray.__version__, '| hydra', hydra.__version__)"
  echo "cores $(nproc)"

  echo; echo "== (a) plain DALI script and python -m sweeper, interleaved: $ROUNDS rounds, $STEPS measured batches each"
  python3 benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 1 --warmup 1 --steps 5 >/dev/null 2>&1   # shards + indexes, untimed
  for r in $(seq 0 $((ROUNDS - 1))); do
    echo "-- round $r ($(($(date +%s) - START)) s)"
    if ((r % 2 == 0)); then plain_run "$r"; ray_run; local_run; else local_run; ray_run; plain_run "$r"; fi
  done 2>&1 | grep -v -E "nvjpeg2k|nvtiff|nvJPEG2000|nvTIFF|^Note: If using"

  if [ "${DALI_LOADERS:-1}" != 0 ]; then
    echo; echo "== (b) +sweep=loaders on images: DataLoader (8 workers, Pillow) against DALI (8 threads, mixed)"
    timeout 200 python3 -m sweeper +sweep=loaders "${real[@]}" data.num_workers=8 data.dali.num_threads=8 \
      data.dali.decoder=mixed workload.steps=50 "${common[@]}" 2>&1 | tee "$OUT/loaders.out"
    echo "-- exit ${PIPESTATUS[0]}"
  fi
  LOADERS=$(newest loaders)
  for mode in dali_match dali_match_local; do      # every run folder of the mode, one summary each
    i=0; for d in $(ls -1d "$RES/$mode"/*/ 2>/dev/null | sort); do cp "$d/summary.csv" "$OUT/$mode-$i-summary.csv"; i=$((i + 1)); done
  done
  [ -n "$LOADERS" ] && cp "$LOADERS/summary.csv" "$OUT/loaders-summary.csv"
  echo; echo "== figures ($(($(date +%s) - START)) s in all)"
  python3 - "$OUT" "$LOADERS" <<'PY'
import glob, json, statistics, sys
import pandas as pd
out, loaders = sys.argv[1:]
plain = []
for path in sorted(glob.glob(f"{out}/plain-*.json")):
    try:
        plain += [run[0] for run in json.loads(open(path).read().strip())["runs"]]
    except (OSError, ValueError, KeyError):
        pass
def trials(mode):
    frames = [pd.read_csv(p) for p in sorted(glob.glob(f"{out}/{mode}-*-summary.csv"))]
    s = pd.concat(frames) if frames else pd.DataFrame(columns=["status", "items_per_s", "phase_other_mean_s"])
    return s[s["status"] == "ok"]
med = lambda xs: statistics.median(xs) if len(xs) else float("nan")
p = med(plain)
print(f"(a) plain DALI script      {p:9,.0f} images/s  median of {len(plain)} pipelines: "
      + " ".join(f"{x:,.0f}" for x in plain) + "  (reference 5,068)")
for mode, label in (("dali_match", "sweeper, Ray executor"), ("dali_match_local", "sweeper, executor=local")):
    ok = trials(mode)
    v = med(list(ok["items_per_s"]))
    ratio = v / p if p == p and p else float("nan")
    print(f"    {label:22} {v:9,.0f} images/s  median of {len(ok)} trials: "
          + " ".join(f"{x:,.0f}" for x in ok["items_per_s"]))
    print(f"        ratio to plain {ratio:.3f}: {'WITHIN 5%' if abs(ratio - 1) <= 0.05 else 'NOT within 5%'}"
          f"   (time outside data_wait per step: median {1e3 * med(list(ok['phase_other_mean_s'])):.3f} ms)")
if loaders:
    s = pd.read_csv(loaders.rstrip("/") + "/summary.csv")
    for loader, g in s.groupby("data.loader"):
        good = g[g["status"] == "ok"]
        print(f"(b) loaders  {loader:6} {len(good)}/{len(g)} ok  {good['items_per_s'].median():9,.0f} images/s  "
              f"first batch {good['time_to_first_batch_s'].median():.2f} s")
PY
  if [ -n "$LOADERS" ]; then echo; echo "(b) the sweeper's verdicts:"; sed -n '/^verdicts against the baseline:/,/^report:/p' "$OUT/loaders.out"; fi
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/dali.log"
