"""The table of bad inputs and hostile conditions, and what each must get (issue 20): the area
tables joined (tests/bad_input_cli.py, _config, _paths, _data, _runs, _history, _commands,
_overnight; a new case goes into its area's table), with what a Case is in tests/bad_input_base.py.

Each Case is a command line as a careless or hostile user types it, with `{T}` the case's
scratch folder, `{R}` its results_dir (inside {T}), `{RUN}` a finished run copied into {R}
when the setup asks for one, `{HIST}` {R}/history. tests/test_bad_input.py runs each one
(in-process unless `slow`) and checks its exit code, its one line on stderr and what it left
on disk; `python -m tests.bad_input_cases` prints the table docs/reliability.md holds.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests import (bad_input_cli, bad_input_commands, bad_input_config, bad_input_data, bad_input_history,
                   bad_input_overnight, bad_input_paths, bad_input_runs)
from tests.bad_input_base import Case

AREAS = (bad_input_paths, bad_input_runs, bad_input_data, bad_input_config, bad_input_cli, bad_input_overnight,
         bad_input_history, bad_input_commands)
ALL = [case for area in AREAS for case in area.CASES]
CASES = [case for case in ALL if not case.slow]
SLOW_CASES = [case for case in ALL if case.slow]     # a process of their own: real signals, Ray, a daemon


def row_key(case: Case) -> str:
    """The columns of a case's row that come from the table; the printed line follows them."""
    names = case.names.replace("{T}", "the folder").replace("{RUN}", "the run folder") or "(nothing on stderr)"
    return f"| {case.id} | {case.point} | `{case.doc_input()}` | {case.code} | {names} |"


def markdown_table(printed: dict) -> str:
    """printed: case id -> the line it printed (tests/test_bad_input.py records them)."""
    rows = ["| case | issue point | command | exit | the line names | the line, as printed |",
            "|---|---|---|---|---|---|"]
    for case in CASES + SLOW_CASES:
        line = printed.get(case.id, "")
        rows.append(f"{row_key(case)} {line.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    import sys

    # python -m tests.bad_input_cases [LINES.json]: LINES.json from SWEEPER_FAULT_LINES=LINES.json pytest ...
    print(markdown_table(json.loads(Path(sys.argv[1]).read_text()) if len(sys.argv) > 1 else {}), end="")
