# One H200: the profiling playbook's microbenchmarks at real sizes (docs/playbook.md), 2-3 minutes.
#   1. +sweep=playbook through the Ray executor: every microbenchmark, one trial each, with a GPU's
#      "auto" sizes; its cells and the comparisons the playbook exists for (PLAYBOOK_ALL=0 skips it)
#   2. the copy microbenchmark against a plain torch copy loop (benchmarks/plain_copy.py), pinned and
#      pageable at 0.5 / 8 / 64 / 512 MB (PLAYBOOK_SIZES), both moving 64 MB per timing; plain runs
#      and sweeps (executor=local, so the 8 trials share one CUDA start) interleaved, COPY_ROUNDS
#      sweeps between plain runs; per size and kind the sweeper's median against the plain median
#      must be within 5% (REFERENCE-NUMBERS.md: 54.3 GB/s pinned, 6.1 GB/s pageable at 512 MB)
#   3. no Ray, zygote or GPU process may be left behind
common=(wandb.enabled=false report.enabled=false results_dir=$RES)
SIZES=${PLAYBOOK_SIZES:-0.5,8,64,512}
COPY_ROUNDS=${COPY_ROUNDS:-8}
COPY_PINNED=${COPY_PINNED:-true,false}     # COPY_PINNED=false: pageable only

session() {
  machine
  if [ "${PLAYBOOK_ALL:-1}" != 0 ]; then
    run_sweep "1. playbook" 150 +sweep=playbook "${common[@]}"
    PB=$(newest playbook); keep "$PB" playbook; leftovers "1. playbook"
    figures cells "$PB" --columns items_per_s p50
  fi
  echo; echo "== 2. copy: plain torch and sweeper, interleaved ($COPY_ROUNDS sweeps between $((COPY_ROUNDS + 1)) plain runs)"
  local r copies=()
  for r in $(seq 0 "$COPY_ROUNDS"); do
    timeout 60 python3 benchmarks/plain_copy.py "$SIZES" "$OUT/plain.json" && { cat "$OUT/plain.json"; echo; } >> "$OUT/plain-runs.jsonl"
    ((r == COPY_ROUNDS)) && break
    run_sweep "2. h2d_copy sizes, round $r" 90 workload=h2d_copy "workload.params.size_mb=$SIZES" \
        "workload.params.pinned=$COPY_PINNED" workload.params.compare=false workload.params.overlap=false \
        executor=local "${common[@]}"
    copies+=("$(newest single)")
  done
  rm -f "$OUT/plain.json"; leftovers "2. copy"
  echo; echo "== figures ($(elapsed) s in all)"
  figures copy --plain "$OUT/plain-runs.jsonl" --runs "${copies[@]}" --within 0.05
}
