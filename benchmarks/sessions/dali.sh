# One H200: NVIDIA DALI through the sweeper against a plain DALI script, and +sweep=loaders on
# images; about 3 minutes (DALI_LOADERS=0 skips (b), ~40 s).
#   (a) a plain DALI script (benchmarks/dali_plain.py: mixed JPEG decode, 8 threads, 2,048 JPEGs of
#       375x500 at quality 90, random-resized-crop 224 and flip, batch 64) and the same setting
#       through `python -m sweeper`, INTERLEAVED: $DALI_ROUNDS rounds, each a plain run (2 fresh
#       pipelines), a sweep through Ray (2 trials) and one with executor=local (2 trials), the order
#       alternating by round so host drift falls on all; 400 batches after the same warm-up (the
#       plain script's first epoch of 32 batches + 5 = the sweeper's 37 warm-up steps). The median
#       sweeper repeat against the median plain pipeline must be within 5%.
#   (b) +sweep=loaders on real-size images: the DataLoader (8 workers, Pillow) against DALI
#       (8 threads, mixed decode), with the verdict table
# How to launch it. DALI is too big for one command, so it comes in parts (../shared/gpu-host/
# bigwheels.sh); this session is the LAST command of that series. From the project root:
#   ../shared/gpu-host/wheelhouse.sh                  # .whl/: Ray, Hydra, OmegaConf, webdataset (once)
#   ../shared/gpu-host/bigwheels.sh                   # .carry0 ... .carryN: DALI and its libraries
# then, back to back (a host is given back 30 s after a command ends):
#   for each part k < N, carrying [".carryK"]:   mkdir -p /tmp/acc && cp .carryK/* /tmp/acc/
#   last, carrying [".carryN", ".whl"]:          cp .carryN/* /tmp/acc/ && bash benchmarks/gpu_session.sh dali
# If /tmp/acc is missing or short (a fresh host), it says so and stops: start again from part 0.
RES=/tmp/results/dali-$START      # this session's runs only
common=(wandb.enabled=false results_dir=$RES)
real=(data.cache_dir=$SWEEPER_CACHE data.kind=images data.num_shards=8 data.samples_per_shard=256 data.images.height=375
      data.images.width=500 data.images.quality=90 data.images.crop_size=224 data.batch_size=64)
ROUNDS=${DALI_ROUNDS:-3}; STEPS=${DALI_STEPS:-400}; WARM=37
match=("${real[@]}" data.loader=dali data.dali.num_threads=8 data.dali.decoder=mixed repeats=2
       workload.warmup_steps=$WARM workload.steps=$STEPS resources.isolation=gpu report.enabled=false "${common[@]}")

install() {   # the DALI parts joined in /tmp/acc, with .whl
  if ! ls /tmp/acc/*.whl >/dev/null 2>&1; then
    ls /tmp/acc/part* >/dev/null 2>&1 || { echo "no DALI parts in /tmp/acc: a fresh host; send the parts again from part 0"; exit 3; }
    cat /tmp/acc/part* | tar x -C /tmp/acc || { echo "the DALI parts do not join: start again from part 0"; exit 3; }
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl /tmp/acc/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD"
  compiled /tmp/site "$PWD"
}
plain_run() { timeout 120 python3 benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 2 --warmup 5 \
                --steps "$STEPS" | tail -1 > "$OUT/plain-$1.json"; echo "-- plain round $1: $(cut -c1-200 "$OUT/plain-$1.json")"; }
sweep_run() { timeout 150 python3 -m sweeper "sweep.name=$1" "${@:2}" "${match[@]}" | grep -E '^\[|^results:'; echo "-- exit ${PIPESTATUS[0]}"; }

session() {
  machine
  echo; echo "== (a) plain DALI script and python -m sweeper, interleaved: $ROUNDS rounds, $STEPS measured batches each"
  python3 benchmarks/dali_plain.py --decoder mixed --threads 8 --repeats 1 --warmup 1 --steps 5 >/dev/null 2>&1   # shards + indexes
  for r in $(seq 0 $((ROUNDS - 1))); do
    echo "-- round $r ($(elapsed) s)"
    if ((r % 2 == 0)); then plain_run "$r"; sweep_run dali_match; sweep_run dali_match_local executor=local
    else sweep_run dali_match_local executor=local; sweep_run dali_match; plain_run "$r"; fi
  done 2>&1 | grep -v -E "nvjpeg2k|nvtiff|nvJPEG2000|nvTIFF|^Note: If using"
  if [ "${DALI_LOADERS:-1}" != 0 ]; then
    echo; echo "== (b) +sweep=loaders on images: DataLoader (8 workers, Pillow) against DALI (8 threads, mixed)"
    timeout 200 python3 -m sweeper +sweep=loaders "${real[@]}" data.num_workers=8 data.dali.num_threads=8 \
      data.dali.decoder=mixed workload.steps=50 "${common[@]}" 2>&1 | tee "$OUT/loaders.out"
  fi
  echo; echo "== figures ($(elapsed) s in all; reference, ../shared/REFERENCE-NUMBERS.md: 5,068 images/s)"
  echo "(a) sweeper, Ray executor:";  figures plain --plain "$OUT"/plain-*.json --runs $(runs_of dali_match) --within 0.05
  echo "(a) sweeper, executor=local:"; figures plain --plain "$OUT"/plain-*.json --runs $(runs_of dali_match_local) --within 0.05
  LOADERS=$(newest loaders); keep "$LOADERS" loaders
  [ -n "$LOADERS" ] && { echo "(b) loaders:"; figures cells "$LOADERS" --columns items_per_s time_to_first_batch_s; }
  [ -f "$OUT/loaders.out" ] && sed -n '/^verdicts against the baseline:/,/^report:/p' "$OUT/loaders.out"
}
