# One H200: start-up (issue: a one-trial sweep within 2 s of `import torch`) with
# benchmarks/startup.py, and the GPU tests after it. About 7 minutes.
session() {
  machine
  echo "== start-up: floor, bare Ray, dry run, one trial local and through Ray, packed 3-s trials"
  timeout "$(limit 420)" python3 benchmarks/startup.py --runs 3 --trials 8 --trial-s 3 --out "$OUT/startup"
  echo "== the GPU tests"; gpu_tests 200 -m gpu tests/
  leftovers "the start-up benchmark and the GPU tests"
}
