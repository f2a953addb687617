# One H200: the history store keyed by a real GPU machine (GPU model, UUIDs, driver from the
# trials' fingerprints), across three short "nights" of the DataLoader sweep, about 2 minutes:
#   1. three runs (run_id night1..night3), pin_memory on/off x 2 workers, repeats=3, executor=local;
#      each run's end appends to $RES/history
#   2. python -m sweeper.history trend / diff / alerts / morning (HTML), then `list`
# What must show: the machine column carries the H200's hash, `list` names the GPU and driver,
# `diff night1 night3` shows no fingerprint change on one host, alerts exit 0 or name a cell.
# .whl must also hold asv's own wheel (sweeper loads asv.step_detect alone):
#   pip download 'asv==0.6.6' --no-deps --only-binary=:all: --python-version 3.12 -d .whl
STORE=$RES/history
H=(python3 -m sweeper.history --store "$STORE")
grid=(+sweep=dataloader data.num_workers=2 data.prefetch_factor=2 "data.pin_memory=false,true" repeats=3
      workload.steps=30 workload.warmup_steps=5 executor=local wandb.enabled=false results_dir=$RES)
session() {
  machine
  for night in night1 night2 night3; do run_sweep "$night" 150 "${grid[@]}" run_id=$night 2>&1 | tail -12; done
  echo "== history"
  "${H[@]}" trend --metric throughput
  "${H[@]}" diff night1 night3
  "${H[@]}" alerts; echo "-- alerts exit $?"
  "${H[@]}" morning --out "$OUT/morning.html"
  echo; echo "== runs in the store (GPU, driver, machine key)"
  "${H[@]}" list
}
