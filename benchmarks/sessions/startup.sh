# One H200: start-up (issue: a one-trial sweep within 2 s of `import torch`) with
# benchmarks/startup.py (the sweeps also with the GPU hold off), whether the GPU keeps its
# driver set up between processes (persistence mode), and the GPU tests. About 9 minutes.
session() {
  machine
  nvidia-smi --query-gpu=persistence_mode --format=csv
  echo "== import torch alone, then the floor while another process holds NVML open (as the sweep does)"
  for i in 1 2; do /usr/bin/time -f "import torch: %e s" python3 -c "import torch"; done
  python3 -c "import pynvml, time; pynvml.nvmlInit(); print('held', flush=True); time.sleep(120)" & local holder=$!
  sleep 4
  for i in 1 2 3; do /usr/bin/time -f "floor, GPU held: %e s" python3 -c "import torch; torch.zeros(1, device='cuda')"; done
  kill "$holder"; wait "$holder" 2>/dev/null
  sleep 2
  for i in 1 2; do /usr/bin/time -f "floor, not held: %e s" python3 -c "import torch; torch.zeros(1, device='cuda')"; done
  echo "== start-up: floor, bare Ray, dry run, one trial local and through Ray, packed 3-s trials (and without the hold)"
  timeout "$(limit 460)" python3 benchmarks/startup.py --runs 3 --trials 8 --trial-s 3 --without-hold --out "$OUT/startup"
  echo "== the GPU tests"; gpu_tests 80 -m gpu tests/
  leftovers "the start-up benchmark and the GPU tests"
}
