# One H200: start-up (issue: a one-trial sweep within 2 s of `import torch`) with
# benchmarks/startup.py, the GPUs' persistence mode, and the GPU tests. About 8 minutes.
session() {
  machine
  nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | sed 's/^/persistence mode: /'
  for i in 1 2; do /usr/bin/time -f "import torch alone: %e s" python3 -c "import torch"; done
  for i in 1 2; do /usr/bin/time -f "import ray alone: %e s" python3 -c "import ray"; done
  echo "== start-up: floor, bare Ray, dry run, one trial local and through Ray, packed 3-s trials"
  timeout "$(limit 400)" python3 benchmarks/startup.py --runs 3 --trials 8 --trial-s 3 --out "$OUT/startup"
  # the GPU tests alone took 58 s on a warm host (2026-12-03); 80 s cut them off after the benchmark
  echo "== the GPU tests"; gpu_tests 200 -m gpu tests/
  leftovers "the start-up benchmark and the GPU tests"
}
