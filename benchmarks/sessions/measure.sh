# One or two H200: the probe's GPU paths (tests/test_probe_gpu.py) and its overhead on a GPT-2 step,
# the dataloader sweep with real host-to-device copies, and GPU packing. About 6 minutes.
session() {
  machine
  echo "== the probe's GPU paths"; gpu_tests 150 -s -m gpu tests/test_probe_gpu.py
  echo "== probe overhead on a GPT-2 step"; timeout 200 python3 benchmarks/probe_overhead.py --device cuda
  run_sweep "dataloader sweep, one H200 per trial" 200 +sweep=dataloader wandb.enabled=false report.enabled=false \
      results_dir=$RES
  keep "$(newest dataloader)" dataloader; figures cells "$(newest dataloader)"
  echo "== GPU packing"; timeout 240 python3 benchmarks/gpu_packing.py --out "$OUT/packing"
}
