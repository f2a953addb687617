"""The bad-input cases of the overnight suite (+sweep=overnight)."""
from tests.bad_input_base import BAD, INTERRUPTED, SMALL, Case

CASES = [
    Case("overnight-sweep-named-twice", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,dataloader]",
         "overnight.lock_file={T}/lock"), BAD, "overnight.sweeps"),
    Case("overnight-alerts-not-importable", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "overnight.lock_file={T}/lock", "overnight.alerts=nosuch_mod:fn") + SMALL, BAD, "overnight.alerts"),
    Case("sigint-ignored-overnight-suite", "15", ("+sweep=overnight", "overnight.lock_file={T}/lock",
         "overnight.sweeps=[dataloader]", "overnight.budget_s=600") + SMALL, INTERRUPTED, "interrupted", slow=True,
         send="SIGINT", when="results/overnight/*/*", background=True),
    Case("overnight-unknown-sweep-after-one", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,nosuch]",
         "overnight.lock_file={T}/lock") + SMALL, BAD, "sweep=nosuch", slow=True),
]
