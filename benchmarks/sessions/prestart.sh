# One H200: packed 3-s trials with and without resources.prestart (the next trial's process and
# CUDA made while one runs), the one-trial sweep beside them, the measured steps' times of both,
# and the GPU tests. About 7 minutes. RUNS=2 ONLY=packed,packed_cold TESTS=tests/test_standby_gpu.py for a shorter check.
session() {
  machine
  echo "== packed 3-s trials, prestart on (the default for GPU trials) and off; the floor and one trial"
  timeout "$(limit 420)" python3 benchmarks/startup.py --runs "${RUNS:-3}" --trials 8 --trial-s 3 \
    --only "${ONLY:-floor,ray,packed,packed_cold}" --out "$OUT/startup"
  echo "== the packed trials' measured steps, prestart on and off (does a standby slow them?)"
  python3 - "$OUT/startup" <<'PY'
import json, statistics, sys
from pathlib import Path
for name in ("packed", "packed_cold"):
    rows = [json.loads(p.read_text()) for p in Path(sys.argv[1], name).glob("*/*/*/trials/*/trial.json")]
    p50 = [r["summary"]["step_p50_s"] * 1e3 for r in rows if r.get("summary")]
    mean = [r["summary"]["step_mean_s"] * 1e3 for r in rows if r.get("summary")]
    p95 = [r["summary"]["step_p95_s"] * 1e3 for r in rows if r.get("summary")]
    print(f"{name:12s} trials {len(p50)}: step p50 {statistics.median(p50):.3f} ms, mean {statistics.median(mean):.3f} ms,"
          f" p95 {statistics.median(p95):.3f} ms (medians over trials; p95 of trials' p95 {sorted(p95)[int(0.95 * (len(p95) - 1))]:.3f} ms)")
PY
  echo "== the GPU tests"; gpu_tests 200 -m gpu "${TESTS:-tests/}"
  leftovers "the packed sweeps and the GPU tests"
}
