# Sourced by the gpu_*.sh scripts: a GPU host has torch but not Ray, Hydra, webdataset or
# DeepSpeed; they come as wheels in .whl (carried along) and go into /tmp/site.
set -uo pipefail
export PYTHONUNBUFFERED=1 SWEEPER_CACHE=/tmp/shards
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
leftovers() {   # what a sweep may have left behind (START: the script's start, in s)
  echo "-- leftovers after $1 ($(($(date +%s) - START)) s):"
  ps -eo pid,ppid,cmd | grep -E "ray::|raylet|gcs_server|sweeper._zygote|sweeper.containment" | grep -v grep \
    && echo "LEFTOVER PROCESSES after $1" || echo "   no Ray/zygote/watchdog process"
  local gpu
  gpu=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
  [ -n "$gpu" ] && echo "LEFTOVER GPU PROCESSES after $1: $gpu" || echo "   no process on the GPUs"
}
