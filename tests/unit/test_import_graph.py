"""No import cycles in the project's packages (docs/architecture.md): read with ast, never imported.

Every import counts, wherever it is written (module level, inside a function, under TYPE_CHECKING): a cycle hidden
in a function is still a cycle. `from package import name` depends on the package (its __init__) and, when `name`
is a submodule, on that submodule too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from import_scan import imports_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("zkconsumer", "rebalance", "fetcher_manager")


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            name = ".".join(file.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = file
    return found


def imports(name: str, file: Path, known: set[str]) -> set[str]:
    """The project modules that module `name` (at `file`) imports."""
    rel = "/".join(name.split(".")) + ("/__init__.py" if file.name == "__init__.py" else ".py")
    found = imports_of(rel, ast.parse(file.read_text(encoding="utf-8"), str(file)))
    return {i.module for i in found if i.module in known and i.module != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def import_graph(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports(name, file, set(found)) for name, file in found.items()}


def test_the_finder_sees_a_cycle_through_a_package_init_and_a_lazy_import(tmp_path: Path) -> None:
    # A fixture tree, so that a finder that sees nothing cannot make the real check pass.
    pkg = tmp_path / "rebalance" / "inner"
    pkg.mkdir(parents=True)
    (tmp_path / "rebalance" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from rebalance.inner.a import A\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from rebalance.inner import c\n")
    (pkg / "c.py").write_text("X = 1\n")
    (tmp_path / "rebalance" / "leaf.py").write_text("import rebalance.inner.c\n")
    assert cycles(import_graph(tmp_path)) == [["rebalance.inner", "rebalance.inner.a", "rebalance.inner.b"]]


def test_no_import_cycles() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 100, "the packages were not found"
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(" <-> ".join(c) for c in found)
