#!/usr/bin/env bash
# GPU host (two H200): the refactored core on real GPUs. The driver (sweeper/driver.py) with the
# Ray executor and the local one, per-trial keepers forked from a torch-preloading zygote, the
# workload specs' GPU requests, the local-Ray watchdog, throughput as the headline:
#   1. the DataLoader sweep, one GPU per trial: pin_memory must be effective (pinned H2D copies),
#      and the terminal shows the tables, verdicts and recommendation
#   2. gpt2-124m bf16 eager training step, one GPU (docs/benchmarks.md: 43.7 ms)
#   3. ZeRO 0-3 at world size 2 (docs/benchmarks.md: 46.5 / 49.7 / 76.0 / 95.4 ms)
#   4. the same step as 2 with executor=local (in the driver's process)
#   5. the GPU-marked tests, and the containment and isolation tests (side by side: the latter
#      use the CPU only)
#   6. after each: no Ray, zygote or watchdog process and no GPU process may be left behind
# Run from the project root with .whl carried (../shared/gpu-host/wheelhouse.sh); about 6
# minutes, each step under `timeout` and all of them under one deadline. Logs and summaries
# land under $OUT; a table of the figures is printed last.
source "$(dirname "$0")/_gpu_host.sh"
START=$(date +%s)
DEADLINE=$((START + ${CORE_BUDGET_S:-430}))
RES=/tmp/results
common=(wandb.enabled=false results_dir=$RES)
read -ra step <<<"${CORE_STEP:-train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16}"   # CORE_STEP: a CPU try-out

limit() {   # seconds for the next step: its own cap, or what is left before the deadline
  local cap=$1 left=$((DEADLINE - $(date +%s)))
  ((left < cap)) && cap=$left
  ((cap < 10)) && cap=10
  echo "$cap"
}
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }
summary() {   # the figures that matter from one run folder
  python3 - "$1" <<'PY'
import sys
import pandas as pd
s = pd.read_csv(sys.argv[1].rstrip("/") + "/summary.csv")
swept = [c for c in s.columns if c.startswith(("data.", "train."))]
cols = swept + [c for c in ("status", "num_gpus", "pin_memory_effective", "device", "items_per_s", "step_p50_s",
                            "step_p50_s_max_rank", "tokens_per_s", "mfu", "peak_memory_allocated_gb", "loss_final",
                            "worker_pid", "pid", "error_type", "error_message") if c in s.columns]
print(s[cols].to_string(index=False))
PY
}
run_sweep() {   # name cap args...: one sweep, its exit code and wall time
  local name=$1 cap; cap=$(limit "$2"); shift 2
  echo; echo "== $name: python3 -m sweeper $* (timeout ${cap}s)"
  local t0; t0=$(date +%s.%N)
  timeout "$cap" python3 -m sweeper "$@"
  local rc=$?
  echo "-- $name: exit $rc$( ((rc == 124)) && echo ' (TIMED OUT)') in $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')") s"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv,noheader
  python3 -c "import torch, ray, hydra; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), '| ray', ray.__version__, '| hydra', hydra.__version__)"
  echo "cores $(nproc)"
  leftovers "start"

  run_sweep "1. dataloader" 110 +sweep=dataloader data.num_workers=2,8 data.prefetch_factor=2 data.pin_memory=false,true \
      repeats=3 workload.steps=50 resources.isolation=gpu "${common[@]}"
  DL=$(newest dataloader); echo "run folder: $DL"
  [ -n "$DL" ] && summary "$DL"
  leftovers "1. dataloader"

  run_sweep "2. train_step (ray)" 100 +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.isolation=gpu report.enabled=false "${common[@]}"
  TS=$(newest train_step); echo "run folder: $TS"
  [ -n "$TS" ] && summary "$TS"
  leftovers "2. train_step (ray)"

  run_sweep "3. zero" 150 +sweep=zero "${step[@]}" report.enabled=false "${common[@]}"
  ZR=$(newest zero); echo "run folder: $ZR"
  [ -n "$ZR" ] && summary "$ZR"
  leftovers "3. zero"

  run_sweep "4. train_step (local)" 80 +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.isolation=gpu executor=local report.enabled=false "${common[@]}"
  TL=$(newest train_step); [ "$TL" = "$TS" ] && TL=""; echo "run folder: $TL"
  [ -n "$TL" ] && summary "$TL"
  leftovers "4. train_step (local)"

  echo; echo "== 5. tests: GPU-marked, and containment + isolation beside them"
  ct=$(limit 150); gt=$(limit 190)
  ( timeout "$ct" python3 -m pytest -q -p no:cacheprovider tests/test_containment.py tests/test_isolation.py \
      --durations=5 >"$OUT/pytest-containment.log" 2>&1; echo "-- containment+isolation tests: exit $?" \
      >>"$OUT/pytest-containment.log" ) &
  cpid=$!
  timeout "$gt" python3 -m pytest -q -m gpu -p no:cacheprovider -s tests/ >"$OUT/pytest-gpu.log" 2>&1
  echo "-- GPU tests: exit $?" | tee -a "$OUT/pytest-gpu.log"
  grep -E "step p50|passed|failed|error|Error" "$OUT/pytest-gpu.log" | tail -25
  wait "$cpid"
  tail -14 "$OUT/pytest-containment.log"
  leftovers "5. tests"

  for pair in "dataloader:$DL" "train_step-ray:$TS" "zero:$ZR" "train_step-local:$TL"; do
    [ -n "${pair#*:}" ] && cp "${pair#*:}/summary.csv" "$OUT/${pair%%:*}-summary.csv"
  done
  echo; echo "== figures ($(($(date +%s) - START)) s in all)"
  python3 - "dataloader=$DL" "train_step ray=$TS" "zero=$ZR" "train_step local=$TL" <<'PY'
import sys
import pandas as pd
def f(v, fmt):
    return "-" if v is None or pd.isna(v) else format(v, fmt)
print(f"{'run':17} {'cell':34} {'n':>2} {'status':8} {'p50 ms':>7} {'items/s':>9} {'tokens/s':>9} {'MFU %':>6} "
      f"{'peak GB':>7} {'pin eff.':8}")
for arg in sys.argv[1:]:
    label, _, path = arg.partition("=")
    if not path:
        print(f"{label:17} (no run folder)"); continue
    s = pd.read_csv(path.rstrip("/") + "/summary.csv")
    swept = [c for c in s.columns if c.startswith(("data.", "train.")) and s[c].nunique() > 1] or \
            [c for c in s.columns if c.startswith(("data.", "train."))][:1]
    for key, g in s.groupby(swept, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cell = " ".join(f"{c.split('.')[-1]}={v}" for c, v in zip(swept, key))
        ok = g[g["status"] == "ok"]
        multi = "num_gpus" in ok and (ok["num_gpus"] > 1).any() and "step_p50_s_max_rank" in ok
        p50 = ok["step_p50_s_max_rank"] if multi else ok.get("step_p50_s")   # several ranks: the slowest one
        med = lambda col: ok[col].median() if col in ok and ok[col].notna().any() else None
        status = ",".join(f"{k}:{v}" for k, v in g["status"].value_counts().items())
        pin = ",".join(sorted(map(str, g["pin_memory_effective"].unique()))) if "pin_memory_effective" in g else "-"
        print(f"{label:17} {cell[:34]:34} {len(g):>2} {status:8} "
              f"{f(p50.median() * 1e3 if p50 is not None and p50.notna().any() else None, '.1f'):>7} "
              f"{f(med('items_per_s'), ',.0f'):>9} {f(med('tokens_per_s'), ',.0f'):>9} "
              f"{f(med('mfu') * 100 if med('mfu') is not None else None, '.1f'):>6} "
              f"{f(med('peak_memory_allocated_gb'), '.2f'):>7} {pin:8}")
print("docs/benchmarks.md: eager bf16 43.7 ms, 373k tok/s, 32.2% MFU, 15.58 GB; "
      "ZeRO 0-3 native 46.5 / 49.7 / 76.0 / 95.4 ms")
PY
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/core.log"
