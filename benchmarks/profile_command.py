"""One `python -m sweeper ...` command under cProfile, as a user runs it: its head start (the
zygote, CUDA's start) and its quick exit included, which `python -m cProfile -m sweeper` loses
(the command ends with os._exit before cProfile writes its file).

    python benchmarks/profile_command.py OUT.prof [override ...]
    python -c "import pstats; pstats.Stats('OUT.prof').sort_stats('cumulative').print_stats(40)"

Only the main thread is profiled: the trials of executor=local, the composing, the analysis.
"""
from __future__ import annotations

import cProfile
import os
import runpy
import sys


def main() -> None:
    out, sys.argv = sys.argv[1], ["sweeper", *sys.argv[2:]]
    profile, quick_exit = cProfile.Profile(), os._exit

    def written_then_exit(code: int) -> None:
        profile.disable()
        profile.dump_stats(out)
        quick_exit(code)

    os._exit = written_then_exit
    profile.enable()
    try:
        runpy.run_module("sweeper", run_name="__main__", alter_sys=True)
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
