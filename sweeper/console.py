"""The `sweeper` command that pip installs (pyproject.toml's [project.scripts]): the same start and
end as `python -m sweeper`. sweeper/__main__.py imports Hydra as it loads, so what comes before
Hydra's import (the young generation, the zygote's or CUDA's head start: sweeper/headstart.py) is
done here first; then the command, and its quick exit (this process is the program).
"""
from __future__ import annotations

import sys


def main() -> None:
    from sweeper.headstart import begin

    begin(sys.argv[1:])
    from sweeper import __main__ as command

    command.exit_with(command.main(), program=True)
