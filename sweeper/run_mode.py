"""Hydra's RUN mode, ended before it writes anything.

sweeper runs every sweep in multirun mode (conf/config.yaml sets hydra.mode: MULTIRUN) through
its own launcher, which writes the run folder itself, atomically and redacted. Hydra enters RUN
mode when told to (hydra.mode=RUN) and when its read of hydra.mode failed (Hydra.get_mode takes
any Exception for "no mode", as a Ctrl-C or SIGTERM landing in that composition makes it); it
would then make a run folder, write the overrides as typed into it (credentials in a shard URL
included) and only then call the task function. This callback runs before that. Hydra turns an
Exception raised in a callback into a warning and goes on, so the refusal is a SystemExit (the
command's error boundary, sweeper/cli.py, prints its one line and exits 2).
"""
from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback

RUN_MODE = ("hydra.mode: sweeper runs every sweep in multirun mode through its own launcher; leave hydra.mode "
            "out (for trials inside this process, a debugger or a profiler, use executor=local)")


class MultirunOnly(Callback):
    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        """An interrupted start ends as the interrupt (sweeper/interrupts.py); RUN mode as asked is one line."""
        from sweeper.interrupts import raise_if_stopped

        raise_if_stopped()
        raise SystemExit(f"error: {RUN_MODE}")
