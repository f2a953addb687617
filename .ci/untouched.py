"""Lists the modules of sweeper/ that a coverage run did not exercise, and exits 1 if there are any.

    coverage run -m pytest -q -m "not slow" && python .ci/untouched.py     (what .ci/coverage runs)

A module counts as touched when at least one line inside one of its functions ran: importing it
(which runs its definitions) is not enough. A module with no function at all counts as touched
once it was imported.
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Dict, List, Set

import coverage

ROOT = Path(__file__).resolve().parent.parent


def body_lines(path: Path) -> Set[int]:
    """Line numbers of the statements inside the module's functions (methods included)."""
    lines: Set[int] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


def untouched(executed: Dict[str, Set[int]], package: Path) -> List[str]:
    """The package's modules (relative paths) none of whose function lines ran."""
    out = []
    for path in sorted(package.rglob("*.py")):
        ran = executed.get(str(path.resolve()))
        inside = body_lines(path)
        if ran is None or (inside and not ran & inside):
            out.append(str(path.relative_to(package.parent)))
    return out


def executed_lines(data_file: str = os.environ.get("COVERAGE_FILE", ".coverage")) -> Dict[str, Set[int]]:
    data = coverage.CoverageData(basename=data_file)
    data.read()
    return {str(Path(f).resolve()): set(data.lines(f) or ()) for f in data.measured_files()}


def main() -> int:
    missing = untouched(executed_lines(), ROOT / "sweeper")
    total = len(list((ROOT / "sweeper").rglob("*.py")))
    for name in missing:
        print(f"untouched: {name}")
    print(f"{total - len(missing)} of {total} modules of sweeper/ exercised by the run")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
