# One H200: does Ray's worker prestart at the raylet's start (RAY_enable_worker_prestart=1) take
# the first trial's wait for a Ray worker off a one-trial sweep? Rounds of the floor, the one-trial
# sweep as it is, and the same with the variable, interleaved; each command's whole time and its
# timeline marks (SWEEPER_TIMELINE). About 3 minutes.
one_trial() {   # mode round: one-trial Ray sweep of benchmarks/gpu_busy.py (0.5 s on the GPU)
  local tl=/tmp/tl_$1_$2 t0 t1
  rm -f "$tl"; t0=$(date +%s.%N)
  if [ "$1" = prestart ]; then export RAY_enable_worker_prestart=1; else unset RAY_enable_worker_prestart; fi
  SWEEPER_TIMELINE=$tl python3 -m sweeper results_dir=/tmp/results/prestart workload.target=benchmarks.gpu_busy:run \
    workload.steps=1 workload.warmup_steps=0 +workload.params.seconds=0.5 resources.isolation=gpu resources.gpus=1 \
    wandb.enabled=false report.enabled=false history.enabled=false >/dev/null 2>&1
  t1=$(date +%s.%N); unset RAY_enable_worker_prestart
  python3 - "$tl" "$t0" "$t1" "$1" <<'PY'
import sys
tl, t0, t1, mode = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
first = {}
for line in open(tl):
    t, _, phase = line.split()[:3]
    first.setdefault(phase, float(t))
keep = ("zygote_ready", "ray_ready", "trial_start", "workload_start", "workload_end", "outcome", "published")
print(f"{mode:9s} whole {t1 - t0:5.2f}  " + "  ".join(f"{k} {first[k] - t0:.2f}" for k in keep if k in first))
PY
}
session() {
  machine
  for r in 1 2 3 4; do
    /usr/bin/time -f "floor     whole %e" python3 -c "import torch; torch.zeros(1, device='cuda')"
    if ((r % 2)); then one_trial as_is "$r"; one_trial prestart "$r"; else one_trial prestart "$r"; one_trial as_is "$r"; fi
    uptime
  done
  leftovers "the prestart rounds"
}
