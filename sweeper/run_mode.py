"""Multirun through sweeper's own sweeper and launcher, and nothing else, before Hydra writes anything.

sweeper runs every sweep in multirun mode through its own grid sweeper and launcher, which write
the run folder themselves, atomically and redacted (sweeper/runfolder.py). Hydra's RUN mode, and
its BasicSweeper, would each write the overrides as typed (credentials in a shard URL included)
into a folder before anything of sweeper's runs. So:

- the command line says --multirun itself (`multirun_argv`): Hydra otherwise decides the mode by
  composing the config once more, and takes RUN mode when that composition fails (a key the
  schema lacks, or a Ctrl-C or SIGTERM landing in it); a grid on the command line then reads as
  an error of its own ("Ambiguous value ... add --multirun") and the real one is lost. With
  --multirun said, Hydra still composes the config once more only to read hydra.mode, which cannot
  change the outcome; `mode_said` spares that composition;
- hydra.mode=RUN on the command line is refused in one line (`asked_for_run_mode`), and `--run`
  by the callback below, before Hydra writes a run folder;
- another sweeper or launcher (hydra/sweeper=basic, hydra/launcher=basic) is refused before
  Hydra makes it.

Hydra turns an Exception raised in a callback into a warning and goes on, so a refusal there is a
SystemExit (the command's error boundary, sweeper/cli.py, prints its one line and exits 2).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

from hydra.experimental.callback import Callback

RUN_MODE = ("hydra.mode: sweeper runs every sweep in multirun mode through its own launcher; leave hydra.mode and "
            "--run out (for trials inside this process, a debugger or a profiler, use executor=local)")
OTHER_SWEEPER = ("hydra/sweeper: only sweeper's grid sweeper runs sweeps; leave hydra/sweeper out (grids go on "
                 "the command line, key=a,b, or in conf/sweep/NAME.yaml)")
OURS = "hydra_plugins.sweeper_ray_launcher."
# Hydra's own commands; each excludes the others, and each but --multirun decides the mode itself
COMMANDS = {"-m": "--multirun", "--multirun": "--multirun", "-r": "--run", "--run": "--run", "-c": "--cfg",
            "--cfg": "--cfg", "-i": "--info", "--info": "--info", "-sc": "--shell-completion",
            "--shell-completion": "--shell-completion", "-h": "--help", "--help": "--help",
            "--hydra-help": "--hydra-help", "--version": "--version", "--experimental-rerun": "--experimental-rerun"}


def multirun_argv(argv: List[str]) -> List[str]:
    """The command line with --multirun said, unless it names a Hydra command of its own."""
    given = {COMMANDS[a.split("=", 1)[0]] for a in argv if a.split("=", 1)[0] in COMMANDS}
    if len(given) > 1:
        raise SystemExit(f"error: {' and '.join(sorted(given))}: give one of Hydra's commands at a time "
                         f"(--multirun is on by itself)")
    return list(argv) if given else ["--multirun", *argv]


@contextmanager
def mode_said(argv: List[str]) -> Iterator[None]:
    """With --multirun in `argv`, Hydra's mode is MULTIRUN whatever the config says (a config's RUN
    gets only a warning), yet Hydra composes the whole config once more to read it (Hydra.get_mode:
    0.2-0.3 s of a one-trial command on 2 cores, before anything else can start). Its answer is
    None meanwhile, as when that composition fails: Hydra then adds hydra.mode=MULTIRUN and goes on."""
    if "--multirun" not in {COMMANDS.get(arg) for arg in argv}:
        yield
        return
    from hydra._internal.hydra import Hydra

    composed = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: None
    try:
        yield
    finally:
        Hydra.get_mode = composed


def asked_for_run_mode(argv: List[str]) -> bool:
    """Whether an override sets hydra.mode to anything but MULTIRUN."""
    return any(key.lstrip("+") == "hydra.mode" and value.strip("'\"").upper() != "MULTIRUN"
               for key, _, value in (a.partition("=") for a in argv if not a.startswith("-")))


def ours(target: str) -> bool:
    """Whether a Hydra plugin (its `_target_`, or its class's module) is sweeper's own."""
    return str(target).startswith(OURS)


def _not_ours(config: Any) -> Optional[str]:
    """The line that refuses this multirun's sweeper or launcher, if either is not sweeper's."""
    from sweeper.entry import OTHER_LAUNCHER

    hydra_cfg = config.hydra
    if not ours(hydra_cfg.sweeper.get("_target_", "")):
        return OTHER_SWEEPER
    if not ours(hydra_cfg.launcher.get("_target_", "")):
        return OTHER_LAUNCHER
    return None


class MultirunOnly(Callback):
    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        """An interrupted start ends as the interrupt (sweeper/interrupts.py); RUN mode as asked is one line."""
        from sweeper.interrupts import raise_if_stopped

        raise_if_stopped()
        raise SystemExit(f"error: {RUN_MODE}")

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        """Before Hydra makes the sweeper (BasicSweeper writes multirun.yaml as it starts)."""
        refused = _not_ours(config)
        if refused:
            raise SystemExit(f"error: {refused}")
