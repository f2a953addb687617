#!/usr/bin/env bash
# GPU host: train.backend=deepspeed for real. gpt2-124m, bf16, B=16, ZeRO 0-3 at world size 1 and 2
# (one and two GPUs), through `python -m sweeper`; about 8 trials, a few minutes on two H200s.
# Run from the project root with .whl carried: it holds DeepSpeed (a pure-python wheel, no ops
# compiled: torch's AdamW is the optimizer) and the dependencies a stock torch image may lack.
#   WITH_NATIVE=1   adds train.backend=native to the grid, for the loss and speed side by side
# Prints the summary table last and leaves the results folder and the log under $OUT.
source "$(dirname "$0")/_gpu_host.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import deepspeed, torch; print('deepspeed', deepspeed.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)" \
    2>&1 | tail -1 | tee -a "$OUT/machine.txt"
backends=deepspeed; [ "${WITH_NATIVE:-0}" = 1 ] && backends=native,deepspeed
results=/tmp/results-deepspeed; rm -rf "$results"
timeout 540 python3 -m sweeper +sweep=zero train.backend=$backends train.preset=gpt2-124m train.micro_batch=16 \
    train.precision=bf16 train.zero_stage=0,1,2,3 train.world_size=1,2 \
    wandb.enabled=false results_dir="$results" > "$OUT/deepspeed.log" 2>&1
echo "sweeper exit code: $?"
cp -r "$results" "$OUT/results-deepspeed" 2>/dev/null
grep -v "^\s*$" "$OUT/deepspeed.log" | grep -v "authentication_token" | tail -60
# the figures that matter, one row a trial (failed trials with their error)
python3 - "$results" <<'EOF'
import glob, sys
import pandas as pd
for path in glob.glob(f"{sys.argv[1]}/*/*/summary.csv"):
    s = pd.read_csv(path)
    cols = [c for c in ("train.backend", "train.zero_stage", "train.world_size", "status", "tokens_per_s", "mfu",
                        "step_p50_s", "peak_memory_allocated_gb", "loss_initial", "loss_final", "error_type")
            if c in s.columns]
    sort = [c for c in ("train.backend", "train.world_size", "train.zero_stage") if c in s.columns]
    print(s[cols].sort_values(sort).to_string(index=False))
    failed = s[s["status"] != "ok"]
    for _, row in failed.iterrows():
        print(f"\nFAILED {row.get('train.zero_stage')} x {row.get('train.world_size')}: {str(row.get('error_message'))[-600:]}")
EOF
