# Sourced by the gpu_*.sh scripts: a GPU host has torch but not Ray, Hydra, webdataset or
# DeepSpeed; they come as wheels in .whl (carried along) and go into /tmp/site.
set -uo pipefail
export PYTHONUNBUFFERED=1 SWEEPER_CACHE=/tmp/shards
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
