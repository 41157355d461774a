"""The Spark oracle (tests/analysis/spark_oracle/) stays a test: no module of the product imports it, so each rule
is defined once in the product and the oracle is only ever a second implementation it is checked against."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORACLE = "spark_oracle"


def imported(path: Path) -> set[str]:
    """Every module an import statement of `path` names (an `import a.b` gives a.b; a `from a import b` gives a and
    a.b, since b may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return names


def names_the_oracle(name: str) -> bool:
    return ORACLE in name.lstrip(".").split(".")


def test_no_product_module_imports_the_oracle() -> None:
    modules = sorted((ROOT / "zkconsumer").rglob("*.py"))
    assert len(modules) > 100 and ROOT / "zkconsumer/lab/analysis/per_run/run.py" in modules
    found = {str(path.relative_to(ROOT)): sorted(n for n in imported(path) if names_the_oracle(n)) for path in modules}
    assert {path: names for path, names in found.items() if names} == {}


def test_the_check_sees_an_import_of_the_oracle(tmp_path: Path) -> None:
    for line in ("import spark_oracle", "import spark_oracle.windows as w", "from spark_oracle import herd",
                 "from spark_oracle.herd import wire_counts", "from tests.analysis import spark_oracle",
                 "def f():\n    from spark_oracle import metrics\n"):
        source = tmp_path / "m.py"
        source.write_text(line + "\n", encoding="utf-8")
        assert any(names_the_oracle(n) for n in imported(source)), line
    source.write_text("import spark_oracles\nfrom zkconsumer.lab.analysis import windows\n", encoding="utf-8")
    assert not any(names_the_oracle(n) for n in imported(source))
