"""The bad-input cases of the overnight suite (+sweep=overnight)."""
from tests.bad_input_base import BAD, INTERRUPTED, SMALL, Case, with_dir

CASES = [
    Case("overnight-sweep-named-twice", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,dataloader]",
         "overnight.lock_file={T}/lock"), BAD, "overnight.sweeps"),
    Case("overnight-alerts-not-importable", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "overnight.lock_file={T}/lock", "overnight.alerts=nosuch_mod:fn") + SMALL, BAD, "overnight.alerts"),
    Case("overnight-lock-a-folder-dry-run", "audit", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "overnight.lock_file={T}/lockdir", "dry_run=true"), BAD, "overnight.lock_file: {T}/lockdir is a folder",
         setup=with_dir("lockdir")),                       # a dry run said nothing; the night then failed on it
    Case("overnight-alerts-not-importable-dry-run", "audit", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "overnight.lock_file={T}/lock", "overnight.alerts=nosuch_mod:fn", "dry_run=true"), BAD, "overnight.alerts"),
    Case("sigint-ignored-overnight-suite", "15", ("+sweep=overnight", "overnight.lock_file={T}/lock",
         "overnight.sweeps=[dataloader]", "overnight.budget_s=600") + SMALL, INTERRUPTED, "interrupted", slow=True,
         send="SIGINT", when="results/overnight/*/*", background=True),
    Case("overnight-history-store-a-file", "audit", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "results_dir={T}/res", "overnight.lock_file={T}/lock") + SMALL, BAD, "history.dir: {T}/res/history is a file",
         setup=lambda ctx: (ctx.T / "res").mkdir() or (ctx.T / "res" / "history").write_text("not a folder\n"),
         slow=True),             # its sweeps' checks looked in the night folder, not the night's store
    Case("overnight-unknown-sweep-after-one", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,nosuch]",
         "overnight.lock_file={T}/lock") + SMALL, BAD, "sweep=nosuch", slow=True),
]
