#!/usr/bin/env bash
# GPU host (H200s): a user's own model in the training-step engine, through `python -m sweeper`.
#   1. examples/user_model/nanogpt_style.py:gpt (a factory of its own, GPT-2 124M shape) against the
#      engine's preset gpt2-124m: bf16, B=16, one GPU a trial, 3 repeats each, interleaved. Prints both
#      step times (median of the repeats' p50) and their ratio, which must be within 3%.
#   2. the user model through ZeRO 0-3 at the largest world size these GPUs allow (1, 2 or 4), next
#      to the preset at the same stages (its losses should agree; step times side by side).
# Run from the project root with .whl carried (Ray, Hydra, webdataset, as for gpu_session_core.sh).
# About 3-4 minutes of GPU time; each sweep under `timeout`. Logs and run folders under $OUT,
# a short table printed last.
source "$(dirname "$0")/_gpu_host.sh"
export PYTHONPATH="$PWD/examples/user_model:$PYTHONPATH"
RES=/tmp/results-usermodel; rm -rf "$RES"
GPUS=$(nvidia-smi -L | wc -l)
WORLD=1; ((GPUS >= 2)) && WORLD=2; ((GPUS >= 4)) && WORLD=4
common=(wandb.enabled=false report.enabled=false results_dir=$RES train.preset=gpt2-124m train.micro_batch=16
        train.precision=bf16 train.accum_steps=1)
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  echo "world size for ZeRO: $WORLD ($GPUS GPUs)"

  echo "== 1. user model vs preset, gpt2-124m bf16 B=16, one GPU a trial, 3 repeats"
  timeout 200 python3 -m sweeper +sweep=train_step 'train.model=null,nanogpt_style:gpt' repeats=3 \
      workload.steps=30 workload.warmup_steps=5 resources.isolation=gpu "${common[@]}"
  echo "-- exit $?"

  echo "== 2. ZeRO 0-3 at world size $WORLD, user model and preset"
  timeout 240 python3 -m sweeper +sweep=zero 'train.model=null,nanogpt_style:gpt' train.zero_stage=0,1,2,3 \
      train.world_size=$WORLD workload.steps=15 workload.warmup_steps=3 "${common[@]}"
  echo "-- exit $?"
} 2>&1 | grep -v "authentication_token" > "$OUT/usermodel.log"
tail -40 "$OUT/usermodel.log"
cp -r "$RES" "$OUT/" 2>/dev/null

python3 - "$(newest train_step)" "$(newest zero)" <<'PY'
import sys
import pandas as pd

def table(folder):
    s = pd.read_csv(folder.rstrip("/") + "/summary.csv")
    s["model"] = s["train.model"].fillna("preset gpt2-124m") if "train.model" in s else "?"
    return s

step = table(sys.argv[1])
ok = step[step["status"] == "ok"]
print("\n== 1. step time (median over repeats of each trial's p50), bf16, B=16, one H200")
p50 = ok.groupby("model")["step_p50_s"].median()
print(ok.groupby("model")[[c for c in ("step_p50_s", "tokens_per_s", "mfu", "loss_final") if c in ok]].median().to_string())
preset, user = p50.get("preset gpt2-124m"), p50.get("nanogpt_style:gpt")
if preset and user:
    ratio = user / preset
    print(f"user {user * 1e3:.1f} ms, preset {preset * 1e3:.1f} ms, ratio {ratio:.3f}: "
          f"{'WITHIN' if abs(ratio - 1) <= 0.03 else 'OUTSIDE'} 3%")
failed = step[step["status"] != "ok"]
for _, row in failed.iterrows():
    print("FAILED", row.get("model"), row.get("error_type"), str(row.get("error_message"))[-300:])

zero = table(sys.argv[2])
print(f"\n== 2. ZeRO 0-3, world size {sorted(set(zero['world_size'].dropna().astype(int)))}")
cols = [c for c in ("model", "zero_stage", "world_size", "status", "step_p50_s", "step_p50_s_max_rank", "tokens_per_s", "mfu",
                    "flops_source", "parallel", "fsdp_units", "peak_memory_allocated_gb", "loss_final", "error_type")
        if c in zero.columns]
print(zero[cols].sort_values(["zero_stage", "model"]).to_string(index=False))
ok = zero[zero["status"] == "ok"]
for stage, rows in ok.groupby("zero_stage"):
    by = rows.set_index("model")
    if {"preset gpt2-124m", "nanogpt_style:gpt"} <= set(by.index):
        u, p = by.loc["nanogpt_style:gpt"], by.loc["preset gpt2-124m"]
        print(f"stage {stage}: loss user - preset {u['loss_final'] - p['loss_final']:+.2e}, "
              f"step time user / preset {u['step_p50_s'] / p['step_p50_s']:.3f}")
PY
