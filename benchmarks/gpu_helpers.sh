# Sourced by benchmarks/gpu_session.sh: what every GPU session shares. A GPU host has torch but
# not Ray, Hydra, webdataset or DeepSpeed; they come as wheels in .whl (carried along,
# ../shared/gpu-host/wheelhouse.sh) and go into /tmp/site. Figures come from the package's own
# analysis of each run (python3 -m benchmarks.figures), never recomputed here.
set -uo pipefail
export PYTHONUNBUFFERED=1 SWEEPER_CACHE=/tmp/shards
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RES=${RES:-/tmp/results}
START=$(date +%s)
DEADLINE=$((START + ${SESSION_BUDGET_S:-3600}))   # no step runs past it (see `limit`)

install() {   # the carried wheels, and any extra wheel files given; a session may redefine it
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl "$@" || exit 1
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  compiled /tmp/site "$PWD"
}
compiled() {   # byte-compiles the folders given, as pip does where it installs and Python where it may
  # write: the hosts set PYTHONDONTWRITEBYTECODE=1, so without it every command compiled Hydra,
  # OmegaConf and sweeper from source again (Hydra's import 0.49 s on an H200 host, 0.11 s with
  # byte code), which no installed sweeper does. The host's own torch has no byte code either:
  # left so, the floor and the sweeps pay it alike (docs/performance.md, "Start-up").
  python3 -m compileall -q -j 0 "$@" > /dev/null || echo "compileall: some files did not compile"
}
elapsed() { echo $(($(date +%s) - START)); }
limit() {   # seconds for the next step: its own cap, or what is left before the deadline (10 at least)
  local cap=$1 left=$((DEADLINE - $(date +%s)))
  ((left < cap)) && cap=$left
  ((cap < 10)) && cap=10
  echo "$cap"
}
newest() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort | tail -1; }    # the newest run folder of sweep $1
runs_of() { ls -1d "$RES/$1"/*/ 2>/dev/null | sort; }              # every run folder of sweep $1
run_sweep() {   # name cap args...: one sweep under `timeout`, its exit code and wall time
  local name=$1 cap; cap=$(limit "$2"); shift 2
  echo; echo "== $name: python3 -m sweeper $* (timeout ${cap}s)"
  local t0 rc; t0=$(date +%s.%N)
  timeout "$cap" python3 -m sweeper "$@"; rc=$?
  echo "-- $name: exit $rc$( ((rc == 124)) && echo ' (TIMED OUT)') in $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')") s"
}
machine() {   # the GPUs, the versions, the cores
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  python3 -c "import ray, hydra; print('ray', ray.__version__, '| hydra', hydra.__version__)" 2>/dev/null
  echo "cores $(nproc)"
}
figures() { python3 -m benchmarks.figures "$@"; }                # cells / pair / plain / copy / fleet
keep() {   # run-folder label: its summary.csv (and cells.csv) into $OUT as <label>-*.csv
  [ -n "$1" ] || return 0
  cp "$1/summary.csv" "$OUT/$2-summary.csv" 2>/dev/null
  cp "$1/cells.csv" "$OUT/$2-cells.csv" 2>/dev/null
  return 0
}
leftovers() {   # what a sweep may have left behind: Ray, zygotes, watchdogs, GPU processes
  echo "-- leftovers after $1 ($(elapsed) s):"
  local found
  found=$(ps -eo pid,ppid,stat,cmd | grep -E "ray::|raylet|gcs_server|agent_standin|sweeper._zygote|sweeper.containment" | grep -v grep)
  # Exited processes that only wait for their parent (PID 1, once their own parent was ended) to
  # collect their exit status hold no memory, GPU or port: counted apart, not as left running.
  echo "$found" | awk '$3 !~ /^Z/' | grep . && echo "LEFTOVER PROCESSES after $1" || echo "   no Ray/zygote/watchdog process"
  local exited; exited=$(echo "$found" | awk '$3 ~ /^Z/' | grep -c .)
  ((exited > 0)) && echo "   $exited exited Ray process(es) not yet collected by PID 1 (zombies)"
  local gpu
  gpu=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
  [ -n "$gpu" ] && echo "LEFTOVER GPU PROCESSES after $1: $gpu" || echo "   no process on the GPUs"
}
before_and_after() {   # cap rounds kinds: one-trial sweeps on the GPU, benchmarks/ab_checkouts.py over
  # BEFORE (a checkout carried beside .whl, default .before, named by its .commit file) and this
  # tree, interleaved; ROUNDS and KINDS, where set, stand for the session's own
  echo "== before ($(cat "${BEFORE:-.before}/.commit" 2>/dev/null || echo "${BEFORE:-.before}")) and after, interleaved"
  timeout "$(limit "$1")" python3 benchmarks/ab_checkouts.py --before "${BEFORE:-.before}" --after . \
    --rounds "${ROUNDS:-$2}" --kinds "${KINDS:-$3}" --device cuda
}
gpu_tests() {   # cap pytest-args...: the GPU-marked tests (and any others named)
  # Their whole output is also kept in $GPU_TESTS_LOG ($OUT/gpu_tests.log): a session's later steps
  # push a failure's traceback out of the part of the output that comes back. A caller that sends
  # the output to a log of its own sets GPU_TESTS_LOG=/dev/null.
  local cap rc; cap=$(limit "$1"); shift
  timeout "$cap" python3 -m pytest -q -p no:cacheprovider -rfE --tb=short "$@" 2>&1 | tee -a "${GPU_TESTS_LOG:-$OUT/gpu_tests.log}"
  rc=${PIPESTATUS[0]}
  echo "-- tests: exit $rc"
}
