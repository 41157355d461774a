"""The import statements of a module, read with ast, never imported: shared by the cycle check
(tests/unit/test_import_graph.py) and the direction rules (tests/test_import_rules.py).

Every statement counts, wherever it is written; each is marked module level or not. "Module level" is anything
outside a function body and outside `if TYPE_CHECKING:` (a class body runs at import). Relative imports are resolved
to absolute names, and `from X import name` also gives X.name, which is a module only when `name` is a submodule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Import:
    file: str  # relative to the root, with forward slashes
    module: str  # absolute dotted name (relative imports resolved)
    line: int
    module_level: bool
    named: bool = False  # `from X import name` also gives X.name, which is a module only when `name` is a submodule


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(rel: str, tree: ast.Module) -> list[Import]:
    """The imports of the module at `rel` (a path relative to the root, with forward slashes)."""
    parts = rel.removesuffix(".py").split("/")
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = [p for p in package if p != "__init__"]
    found: list[Import] = []

    def visit(node: ast.AST, module_level: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            module_level = False
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, module_level)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(rel, alias.name, node.lineno, module_level) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.append(Import(rel, source, node.lineno, module_level))
            # `from zkconsumer import lab` imports the submodule zkconsumer.lab
            found.extend(Import(rel, f"{source}.{alias.name}", node.lineno, module_level, named=True)
                         for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, module_level)

    visit(tree, True)
    return found
