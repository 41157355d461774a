"""The simulation drives the product only through what the product offers (its constructors' `zk_factory=`,
`sync=`, public methods): it never sets a private attribute of a product object, so renaming one in the product
cannot silently change or deadlock the simulation (docs/simulation.md, "How the product is driven").

A pure ast scan, no servers: the private names the product's classes define (`self._x = ...`, `def _x`, class
attributes `_x`) against every place in zkconsumer/lab/sim/ that sets such a name on something other than
`self`: an assignment `obj._x = ...`, `setattr(obj, "_x", ...)`, `obj.__dict__["_x"] = ...`, or a class body
that redefines `_x` under a subclass of a product class (a descriptor standing in for the attribute).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / "rebalance", ROOT / "zkconsumer"]
EXCLUDED = ROOT / "zkconsumer" / "lab"  # the lab (and the simulation in it) is not the product
SIM = ROOT / "zkconsumer" / "lab" / "sim"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def product_private_names() -> set[str]:
    names: set[str] = set()
    for top in PRODUCT:
        for path in top.rglob("*.py"):
            if EXCLUDED in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_self(node.value):
                    names.add(node.attr)
                elif isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            names.add(item.name)
                        for target in _class_targets(item):
                            names.add(target)
    return {n for n in names if _private(n)}


def _class_targets(item: ast.stmt) -> list[str]:
    targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
        item, ast.AnnAssign | ast.AugAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _product_classes(tree: ast.Module) -> set[str]:
    """Names a module imports from the product (rebalance.*, zkconsumer.* outside the lab)."""
    found = set()
    for node in ast.walk(tree):
        module = node.module if isinstance(node, ast.ImportFrom) else None
        if module and module.split(".")[0] in ("rebalance", "zkconsumer") and not module.startswith("zkconsumer.lab"):
            found.update(alias.asname or alias.name for alias in node.names)  # type: ignore[attr-defined]
    return found


def reaches(source: str, filename: str, private: set[str]) -> list[str]:
    """Where `source` sets one of the product's private names on an object that is not its own `self`."""
    tree = ast.parse(source, filename)
    product = _product_classes(tree)
    found = []

    def hit(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{node.lineno}: {what}")  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and not _is_self(node.value) \
                and node.attr in private:
            hit(node, f"sets {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in private:
            hit(node, f"setattr(..., {node.args[1].value!r})")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__" \
                and isinstance(node.slice, ast.Constant) and node.slice.value in private:
            hit(node, f"sets {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in product for b in node.bases):
            for item in node.body:
                for target in _class_targets(item):
                    if target in private:
                        hit(item, f"class {node.name} redefines {target} of its product base")
    return found


def test_the_simulation_sets_no_private_attribute_of_a_product_object() -> None:
    private = product_private_names()
    assert {"_cond", "_shutting_down", "_watch_lock", "_closing", "_thread", "_run_lock"} <= private
    found = [hit for path in sorted(SIM.rglob("*.py")) for hit in reaches(path.read_text(), str(path), private)]
    assert not found, "the simulation reaches into the product; offer a seam instead:\n" + "\n".join(found)


def test_the_scan_finds_each_way_of_reaching_in() -> None:
    """What the simulation once did (and the other spellings of it) is found."""
    source = '''
from rebalance.listener import ZKRebalancerListener
from zkconsumer.zookeeper.memory_watch import ChildrenWatch

class SimChildrenWatch(ChildrenWatch):
    _run_lock = object()

class Mine:
    def __init__(self, listener):
        self._cond = None  # its own attribute: fine
        listener._cond = None
        listener._shutting_down += 1
        setattr(listener, "_thread", self)
        listener.__dict__["_closing"] = None
        listener.build_assignment_context = None  # public: allowed
'''
    found = reaches(source, "example.py", product_private_names())
    assert sorted(line.split(": ", 1)[1] for line in found) == sorted([
        "class SimChildrenWatch redefines _run_lock of its product base",
        "sets listener._cond",
        "sets listener._shutting_down",
        "setattr(..., '_thread')",
        "sets listener.__dict__['_closing']",
    ]), found
