#!/usr/bin/env bash
# GPU host (one or two H200; ask for nvidia-h200-x2, or x4 where lent): the fleet characterisation
# of one host (docs/overnight.md#the-fleet). One cell, the gpt2-124m bf16 training step, runs on
# every GPU of the host at once (resources.every_device=true: one Ray task per GPU, submitted
# together, so Ray gives each its own GPU; no GPU list anywhere), 6 repeats per GPU. The
# Analysis compares each GPU with its peers (Mann-Whitney over repeats, Holm, min effect 5%)
# and puts its SM clock, temperature and power (NVML means) beside it.
# Prints the per-GPU table last: GPU UUID, node, items/s, ratio to peers, p, outlier flag,
# clock, temperature, power. With one GPU there are no peers: the table has that GPU only.
# Run from the project root with .whl carried (../shared/gpu-host/wheelhouse.sh); under 3 minutes.
source "$(dirname "$0")/_gpu_host.sh"
START=$(date +%s)
RES=/tmp/results
read -ra step <<<"${FLEET_STEP:-train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16}"   # a CPU try-out: FLEET_STEP=

{
  nvidia-smi --query-gpu=index,uuid,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
  echo; echo "== fleet: python3 -m sweeper +sweep=train_step resources.every_device=true (timeout 150 s)"
  timeout 150 python3 -m sweeper +sweep=train_step "${step[@]}" train.accum_steps=1 train.compile=false \
      resources.every_device=true resources.isolation=gpu repeats=6 \
      workload.steps=40 workload.warmup_steps=5 wandb.enabled=false report.enabled=true results_dir=$RES
  echo "-- fleet: exit $? in $(($(date +%s) - START)) s"
  RUN=$(ls -1d $RES/train_step/*/ 2>/dev/null | sort | tail -1)
  [ -n "$RUN" ] && cp "$RUN"/{summary.csv,cells.csv,report.md} "$OUT"/ 2>/dev/null
  [ -f "$RUN/fleet.csv" ] && cp "$RUN/fleet.csv" "$OUT"/
  echo; echo "== per-GPU table ($(($(date +%s) - START)) s in all)"
  python3 - "$RUN" <<'PY'
import json, sys
from pathlib import Path
import pandas as pd
from sweeper.analysis.fleet import SENSORS, device_of
run = Path(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else ".")
rows = []
for p in sorted(run.glob("trials/*/trial.json")):
    r = json.loads(p.read_text())
    s = r.get("summary") or {}
    rows.append({**device_of(r), "status": r["status"], "items_per_s": s.get("items_per_s"),
                 **{name: s.get(key) for key, name in SENSORS}})
if not rows:
    sys.exit("no trials: see the log above")
per = (pd.DataFrame(rows).groupby(["device", "node"], dropna=False)
       .agg(trials=("status", "size"), ok=("status", lambda s: int((s == "ok").sum())),
            items_per_s=("items_per_s", "median"), sm_clock_mhz=("sm_clock_mhz", "mean"),
            temp_c=("temp_c", "mean"), power_w=("power_w", "mean")).reset_index())
fleet = run / "fleet.csv"
if fleet.exists():
    f = pd.read_csv(fleet)[["device", "ratio", "p_adj", "verdict", "outlier"]]
    per = per.merge(f, on="device", how="left")
else:
    per["outlier"] = "(no peers)"
per["node"] = per["node"].astype(str).str[:12]
pd.set_option("display.width", 200)
print(per.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
PY
} 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/fleet.log"
