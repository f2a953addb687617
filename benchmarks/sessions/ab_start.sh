# One H200: a change to the command's start, before and after. benchmarks/ab_checkouts.py over
# BEFORE (a checkout carried beside .whl, default .before: `git worktree add .before <commit>`,
# named in .git/info/exclude; `git rev-parse --short HEAD > .before/.commit` names it in the log,
# since the host cannot read a worktree's git folder) and this tree, one-trial sweeps on the GPU (KINDS, default
# local,ray; ROUNDS, default 8), interleaved; then benchmarks/startup.py's floor and one-trial rows
# for this tree, and the GPU tests (TESTS, default all). About 6 minutes.
session() {
  machine
  before_and_after 260 8 local,ray
  echo "== start-up of this tree: the floor and the one-trial sweeps"
  timeout "$(limit 150)" python3 benchmarks/startup.py --runs 3 --only floor,local,ray --out "$OUT/startup"
  echo "== the GPU tests"; gpu_tests 200 -m gpu "${TESTS:-tests/}"
  leftovers "the before-and-after sweeps and the GPU tests"
}
