"""`python -m sweeper [+sweep=NAME] [key=value ...]`: parse, compose, launch, exit.

Hydra parses and composes; its launcher plugin (hydra_plugins/sweeper_ray_launcher) is an
adapter that hands the checked jobs to sweeper.driver; Ray is imported only once the first job
is composed and checked and runs on Ray (sweeper/executors), so `--help` and config errors stay fast.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator, List, Optional


def shadowing_folder(package) -> Optional[str]:
    """The folder Python took for the sweeper package instead of the installed one, if it did: run
    beside a folder named sweeper (the parent of a checkout cloned as sweeper/), the editable
    install's finder comes after that folder, which then imports as a namespace package, and its
    results/ or conf/ then stand in for sweeper's own modules."""
    return None if getattr(package, "__file__", None) else next(iter(getattr(package, "__path__", [])), "?")


_HIDDEN_BY = shadowing_folder(sys.modules.get("sweeper"))
if _HIDDEN_BY is not None:
    print(f"error: the folder {_HIDDEN_BY} hides the installed sweeper package "
          f"(Python imports a folder of that name in the current folder first); run `python -m sweeper` from "
          f"inside the checkout or from another folder", file=sys.stderr)
    sys.exit(2)                  # exitcodes.USAGE, not imported: sweeper's own modules may be what is hidden

if __name__ == "__main__":     # the command itself: the node zygote's imports, or CUDA's start, before Hydra's (0.3-0.5 s)
    from sweeper.headstart import begin

    begin(sys.argv[1:])

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from sweeper import cli, exitcodes  # noqa: E402
from sweeper.config import register_configs  # noqa: E402
from sweeper.confdir import conf_dir  # noqa: E402
from sweeper.timeline import mark  # noqa: E402

CONF_DIR = str(conf_dir())   # inside the installed package, or the checkout's conf/


def run_in_process(cfg: DictConfig) -> None:
    """Hydra's task function. The sweeper launcher runs every sweep itself and never calls it;
    another launcher (hydra/launcher=basic) would, and is refused with what to use instead.
    Hydra's RUN mode (asked for, or its fallback when a Ctrl-C or SIGTERM cut its read of
    hydra.mode short) ends before this, in sweeper/run_mode.py; should it get here, an
    interrupted start still ends as one (sweeper/interrupts.py), not as a launcher error."""
    from sweeper.entry import refuse_other_launcher
    from sweeper.interrupts import raise_if_stopped

    raise_if_stopped()
    refuse_other_launcher()


_hydra_main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(run_in_process)


def quote_shard_patterns(argv: list) -> list:
    """`data.url=/d/train-{0000..0099}.tar` as users write it for webdataset; Hydra's
    override grammar would read the braces as a dict, so quote such a value for it."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == "data.url" and "{" in value and value[:1] not in "'\"":
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


INTERRUPTED = "while starting or ending: finished trials are kept; add resume=latest to the same command to finish the sweep"


def main(argv: Optional[List[str]] = None) -> int:
    """The command, behind the one error boundary (sweeper.cli): returns the exit code."""
    mark("main")
    args = quote_shard_patterns(list(sys.argv[1:] if argv is None else argv))
    return cli.run(lambda: sweep(args), interrupted=INTERRUPTED)


def sweep(args: List[str]) -> int:
    from sweeper import flags, run_mode
    from sweeper.interrupts import stop_with_suite

    stop_with_suite()
    exitcodes.reset()
    if run_mode.asked_for_run_mode(args):
        raise SystemExit(f"error: {run_mode.RUN_MODE}")
    hydra_args = flags.checked(args)
    with spare_zygote(hydra_args):
        register_configs()
        argv = run_mode.multirun_argv(hydra_args)
        with cli.argv_as(argv), run_mode.mode_said(argv), cli.hydra_raises(), flags.package_found(args):
            _hydra_main()
    return exitcodes.code()


@contextlib.contextmanager
def spare_zygote(args: List[str]) -> Iterator[None]:
    """Starts the node zygote now when the command may run on a local Ray (where this module is
    the program, it started before Hydra was imported, below), so that its imports (torch: seconds)
    overlap composing; the Ray executor adopts it, and it ends with the command if none did (a
    config error, executor=local in a file)."""
    from sweeper.headstart import start_spare_for

    if not start_spare_for(args):
        yield
        return
    from sweeper.nodezygote import end_spare

    try:
        yield
    finally:
        end_spare()


def exit_with(code: int, program: bool = False) -> None:
    """Ends the command as the interpreter would, less its teardown: where this module is the
    program (`python -m sweeper`, or `program`: the `sweeper` script, sweeper/console.py) and no
    thread but daemons is left, it runs the atexit handlers
    (logging's, W&B's, Ray's, a trial's own) and exits where the interpreter would walk and free
    every object of torch, pandas and Ray, after the table is out: 0.16-0.28 s of a one-trial sweep
    with executor=local here. Otherwise the interpreter ends it: a caller that ran it with runpy
    gets SystemExit, and a thread that is no daemon (an idle ThreadPoolExecutor a trial kept, with
    executor=local) is ended by Python's own shutdown, which wakes such pools before it joins them.
    Everything alive moves to the permanent generation first, so the interpreter's last collections
    skip it (0.5-0.7 s here)."""
    import atexit
    import gc
    import os
    import threading

    gc.freeze()
    main_module = getattr(sys.modules.get("__main__"), "__spec__", None)
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not (program or getattr(main_module, "name", None) == __spec__.name) or others:
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    except KeyboardInterrupt:          # a stop while they run: the table is out, nothing is left to write
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # a closed pipe (`| head`) or stream: nothing more to say there
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_with(main())
