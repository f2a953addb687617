"""`python -m sweeper [+sweep=NAME] [key=value ...]`: parse, compose, launch, exit.

Hydra parses and composes; its launcher plugin (hydra_plugins/sweeper_ray_launcher) is an
adapter that hands the checked jobs to sweeper.driver, which imports Ray only when the Ray
executor starts; `--help` and config errors stay fast.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import hydra
from omegaconf import DictConfig

from sweeper import cli, exitcodes
from sweeper.config import register_configs
from sweeper.confdir import conf_dir
from sweeper.timeline import mark

CONF_DIR = str(conf_dir())   # inside the installed package, or the checkout's conf/


def run_in_process(cfg: DictConfig) -> None:
    """Hydra's task function. The sweeper launcher runs every sweep itself and never calls it;
    another launcher (hydra/launcher=basic) would, and is refused with what to use instead."""
    from sweeper.entry import OTHER_LAUNCHER

    print(f"error: {OTHER_LAUNCHER}", file=sys.stderr)
    exitcodes.report(exitcodes.USAGE)


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
    exitcodes.reset()
    register_configs()
    with cli.argv_as(args), cli.hydra_raises():
        _hydra_main()
    return exitcodes.code()


def exit_with(code: int) -> None:
    """Ends the command. Everything alive moves to the permanent generation first: the
    interpreter's last collections would otherwise walk every object of pandas, scipy, Ray and
    torch for nothing (0.5-0.7 s here), after the table is out."""
    import gc

    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    exit_with(main())
