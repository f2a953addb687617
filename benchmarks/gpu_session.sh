#!/usr/bin/env bash
# One GPU session: `bash benchmarks/gpu_session.sh NAME`, run from the project root on a GPU host
# with .whl carried (../shared/gpu-host/wheelhouse.sh). NAME is one of benchmarks/sessions/*.sh;
# each says at its top what it runs, on how many GPUs, and how long it takes. The helpers they
# share (install, run_sweep, newest, leftovers, figures) are in benchmarks/gpu_helpers.sh.
# Logs land in $OUT (default /tmp/out) as NAME.log; each session prints its figures last.
set -uo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
if [ -z "$name" ] || [ ! -f "benchmarks/sessions/$name.sh" ]; then
  echo "usage: bash benchmarks/gpu_session.sh NAME, NAME one of: $(cd benchmarks/sessions && ls -- *.sh | sed 's/\.sh$//' | tr '\n' ' ')"
  exit 2
fi
source benchmarks/gpu_helpers.sh
source "benchmarks/sessions/$name.sh"
install
session 2>&1 | grep --line-buffered -v "authentication_token" | tee "$OUT/$name.log"
