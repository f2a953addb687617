"""The package's shape: no import circle among sweeper/'s modules (lazy imports inside functions
count too), and no module over 400 lines. Parsed with ast, nothing imported: well under a second."""
import ast
from pathlib import Path
from typing import Dict, List, Set

from tests.conftest import ROOT

PACKAGE = ROOT / "sweeper"
MAX_LINES = 400


def modules() -> Dict[str, Path]:
    """Dotted module name -> file, for every module of sweeper/ (a package by its __init__)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported_names(module: str, path: Path) -> Set[str]:
    """Every dotted name the module imports, at any depth of its code; relative imports resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = package[:len(package) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def graph(mods: Dict[str, Path]) -> Dict[str, Set[str]]:
    """module -> the sweeper modules it imports (`from pkg import mod` names mod; a package's
    own submodules and its parents are not edges: importing one runs the other anyway)."""
    def owner(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None
    edges = {}
    for module, path in mods.items():
        targets = {owner(n) for n in imported_names(module, path)} - {None, module}
        edges[module] = {t for t in targets if not module.startswith(t + ".") and not t.startswith(module + ".")}
    return edges


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Each import circle, as the path that closes it (a -> b -> a), found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"
    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_names_a_lazy_circle_through_a_relative_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("from pkg import a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    mods = {"pkg": pkg / "__init__.py", "pkg.sub": pkg / "sub" / "__init__.py", "pkg.a": pkg / "a.py",
            "pkg.sub.b": pkg / "sub" / "b.py", "pkg.c": pkg / "c.py"}
    assert cycles(graph(mods)) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_no_import_cycle_in_sweeper():
    found = cycles(graph(modules()))
    assert not found, "import circles in sweeper/: " + "; ".join(" -> ".join(c) for c in found)


def test_no_module_of_sweeper_is_over_400_lines():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: " + ", ".join(f"{m} ({n})" for m, n in sorted(long.items()))
