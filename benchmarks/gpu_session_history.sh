#!/usr/bin/env bash
# GPU host: the history store keyed by a real GPU machine (GPU model, UUIDs, driver from the
# trials' fingerprints), across three short "nights" of the DataLoader sweep on the GPU:
#   1. three runs (run_id night1..night3), one GPU per trial, pin_memory on/off x 2 workers,
#      repeats=3, executor=local; each run's end appends to $RES/history
#   2. python -m sweeper.history list / trend / diff / alerts, and the morning report (HTML)
# What must show: the machine column carries the H200's hash, `list` names the GPU and driver,
# `diff night1 night3` shows no fingerprint change on one host, alerts exit 0 or name a cell.
# Needs .whl from ../shared/gpu-host/wheelhouse.sh plus asv's own wheel (no dependencies needed:
# sweeper loads asv.step_detect alone):
#   pip download 'asv==0.6.6' --no-deps --only-binary=:all: --python-version 3.12 -d .whl
# About 2 minutes. Logs and the morning report land under $OUT; the `list` table is printed last.
source "$(dirname "$0")/_gpu_host.sh"
RES=/tmp/results
STORE=$RES/history
H=(python3 -m sweeper.history --store "$STORE")
grid=(+sweep=dataloader "data.num_workers=2" "data.prefetch_factor=2" "data.pin_memory=false,true" repeats=3
      workload.steps=30 workload.warmup_steps=5 executor=local wandb.enabled=false results_dir=$RES)
{
  nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader
  for night in night1 night2 night3; do
    echo "== $night"
    timeout 150 python3 -m sweeper "${grid[@]}" run_id=$night 2>&1 | tail -12
    echo "-- exit ${PIPESTATUS[0]}"
  done
  echo "== history"
  "${H[@]}" trend --metric throughput
  "${H[@]}" diff night1 night3
  "${H[@]}" alerts; echo "-- alerts exit $?"
  "${H[@]}" morning --out "$OUT/morning.html"
  find "$STORE" -name '*.parquet' | head
} >"$OUT/history.log" 2>&1
tail -60 "$OUT/history.log"
echo; echo "== runs in the store (GPU, driver, machine key)"
"${H[@]}" list
