#!/usr/bin/env bash
# The CPU benchmark suite: start-up, then per-trial overhead next to Hydra and Ray Tune.
# About 10 minutes on a 2-core machine. Writes results/benchmarks/<time>/performance.md
# (the machine, the commands and every table) and prints it.
#   benchmarks/run_all.sh                      # with the python on PATH
#   PYTHON=/work/venv/bin/python benchmarks/run_all.sh
# The GPU packing script runs apart, on a GPU host: see benchmarks/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python}"
out="results/benchmarks/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
"$py" benchmarks/startup.py --out "$out/startup"
"$py" benchmarks/overhead.py --out "$out/overhead"
{
  echo "# sweeper performance, $(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "## Start-up"
  echo
  cat "$out/startup/startup.md"
  echo
  echo "## Per-trial overhead"
  echo
  cat "$out/overhead/overhead.md"
} > "$out/performance.md"
echo
echo "written: $out/performance.md"
