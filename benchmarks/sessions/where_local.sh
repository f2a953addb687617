# One H200: where a one-trial `executor=local` sweep's seconds go, and a change to them before and
# after. benchmarks/ab_checkouts.py over BEFORE (a checkout carried beside .whl, default .before, as
# in ab_start.sh) and this tree (KINDS, default local; ROUNDS, default 6), interleaved; then
# benchmarks/startup.py's floor and local rows for this tree; then one such sweep of this tree under
# cProfile (benchmarks/profile_command.py: $OUT/local.prof, its sweeper and Hydra lines in
# $OUT/local_profile.txt) and under -X importtime (the top-level imports, slowest last). About 4 minutes.
session() {
  machine
  before_and_after 200 6 local
  echo "== start-up of this tree: the floor and the local one-trial sweep"
  timeout "$(limit 120)" python3 benchmarks/startup.py --runs 3 --only floor,local --out "$OUT/startup"
  local args
  read -r -a args <<< "$(python3 -c "from benchmarks.startup import trial_args; print(' '.join(trial_args('cuda', 0.5)))")"
  echo "== one under cProfile"
  timeout "$(limit 60)" python3 benchmarks/profile_command.py "$OUT/local.prof" "results_dir=$RES/profiled" "${args[@]}" executor=local
  python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(r'sweeper/|hydra_plugins|hydra/_internal/(hydra|config_loader_impl)|(torch|pandas|pyarrow|scipy)/__init__', 60)" \
    "$OUT/local.prof" > "$OUT/local_profile.txt"
  grep -E "^ +[0-9]" "$OUT/local_profile.txt" | head -30 | cut -c1-160
  echo "== its imports (-X importtime): each top-level package, seconds, slowest last"
  timeout "$(limit 60)" python3 -X importtime -m sweeper "results_dir=$RES/imports" "${args[@]}" executor=local 2> "$OUT/local_imports.txt" > /dev/null
  python3 -c "import sys; from benchmarks.startup import import_times
top = sorted(import_times(open(sys.argv[1]).read()).items(), key=lambda kv: kv[1])
print('  '.join(f'{name} {seconds:.2f}' for name, seconds in top[-14:]))" "$OUT/local_imports.txt"
  leftovers "the local sweeps"
}
