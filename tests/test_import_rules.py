"""Which module may import what (docs/DESIGN.md, "Imports"): read with ast, never imported, so no server and no extra.

The cycle check (tests/unit/test_import_graph.py) passes a reversed edge that closes no cycle; these rules are about
direction and about who may touch what:

- nothing outside zkconsumer/lab imports the lab; the CLI names the lab's entry points only as strings that
  zkconsumer.extras.load imports after checking the extra, and those strings are listed here;
- rebalance never imports zkconsumer; fetcher_manager imports neither;
- kazoo, and kafka-python's internals, are imported only by the modules DESIGN.md names (the lists are read from it,
  so the document and this test cannot disagree);
- outside the lab, a module imports at module level only the core dependencies (pyproject.toml), except an extra's
  gateway module (DESIGN.md names them), which itself no product module imports at module level.

Every import statement counts for the first three: module level, in a function, under TYPE_CHECKING. "Module level"
is anything outside a function body and outside `if TYPE_CHECKING:` (a class body runs at import). Each rule is also
run on a small tree that breaks it, so a finder that sees nothing cannot pass.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest
from import_scan import Import, imports_of

from zkconsumer.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("zkconsumer", "rebalance", "fetcher_manager")
LAB = "zkconsumer/lab/"
# The CLI's doors into the lab: `module:attr` strings that zkconsumer.extras.load imports, each after its extra.
LAB_ENTRY_POINTS = {
    ("zkconsumer/cli.py", "zkconsumer.lab.cli:lab"),
    ("zkconsumer/cli_consumer.py", "zkconsumer.lab.main_job:run_main_job"),
}
# kafka-python's public modules (its documented API); any other kafka.* module is an internal.
KAFKA_PUBLIC = {"kafka", "kafka.errors", "kafka.admin"}
# pip distribution name -> import name, where they differ
IMPORT_NAMES = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}
_ENTRY = re.compile(r"zkconsumer\.lab(\.\w+)*(:\w+)?")


@functools.cache
def _parse(root: Path) -> dict[str, ast.Module]:
    trees = {}
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            trees[rel] = ast.parse(file.read_text(encoding="utf-8"), rel)
    return trees


@functools.cache
def all_imports(root: Path) -> list[Import]:
    return [imp for rel, tree in _parse(root).items() for imp in imports_of(rel, tree)]


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _show(imports: list[Import]) -> str:
    return "\n".join(f"  {i.file}:{i.line} imports {i.module}" for i in imports)


def _files(imports: list[Import]) -> list[str]:
    return sorted({i.file for i in imports})


# --- the rules, as functions of a tree (so the fixture trees below can break each one) -------------------------------

def lab_imports_from_outside(root: Path) -> list[Import]:
    return [i for i in all_imports(root) if not i.file.startswith(LAB) and _under(i.module, "zkconsumer.lab")]


def lab_entry_strings_outside(root: Path) -> set[tuple[str, str]]:
    """(file, string) for every string constant outside the lab that names a lab module (`pkg.mod` or `pkg.mod:attr`),
    whatever reads it: importlib, runpy, `python -m`."""
    return {(rel, node.value) for rel, tree in _parse(root).items() if not rel.startswith(LAB)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _ENTRY.fullmatch(node.value)}


def reversed_edges(root: Path) -> list[Import]:
    """rebalance -> zkconsumer, and fetcher_manager -> zkconsumer or rebalance."""
    forbidden = {"rebalance/": ("zkconsumer",), "fetcher_manager/": ("zkconsumer", "rebalance")}
    return [i for i in all_imports(root) for where, targets in forbidden.items()
            if i.file.startswith(where) and any(_under(i.module, t) for t in targets)]


# Inside the lab, the rooms a room stands on (docs/architecture.md): the rules, scenarios and wire decoding are read by
# every other room and read none of them; members are started by drivers, which runs orchestrate, never the other way.
_ABOVE = ("runs", "drivers", "members", "analysis", "sim", "chaos", "lesson")
LAB_ROOMS_NEVER_IMPORT = {
    "zkconsumer/lab/rules/": _ABOVE,
    "zkconsumer/lab/scenarios/": _ABOVE,
    "zkconsumer/lab/wire/": _ABOVE,
    "zkconsumer/lab/members/": tuple(r for r in _ABOVE if r != "members"),
    "zkconsumer/lab/drivers/": tuple(r for r in _ABOVE if r not in ("drivers", "members")),
}


def lab_rooms_upwards(root: Path) -> list[Import]:
    """An import from a lab room of one it must not stand on (LAB_ROOMS_NEVER_IMPORT)."""
    return [i for i in all_imports(root) for where, rooms in LAB_ROOMS_NEVER_IMPORT.items()
            if i.file.startswith(where) and any(_under(i.module, f"zkconsumer.lab.{room}") for room in rooms)]


def importers(root: Path, wanted) -> set[str]:
    return {i.file for i in all_imports(root) if wanted(i.module)}


def kafka_internal(module: str) -> bool:
    return _under(module, "kafka") and module not in KAFKA_PUBLIC


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent that is not a package
        return False


def kafka_internals_importers(root: Path) -> set[str]:
    """Files importing a kafka-python module other than the public ones (`from kafka import KafkaConsumer` does not
    count; `from kafka import protocol` does: kafka-python is installed, so submodules are told from names)."""
    return {i.file for i in all_imports(root) if kafka_internal(i.module) and (not i.named or _is_module(i.module))}


def third_party_at_module_level(root: Path, allowed: set[str]) -> list[Import]:
    """Module-level imports, outside the lab, of a third-party package not in `allowed`."""
    ours = set(PACKAGES)
    return [i for i in all_imports(root) if i.module_level and not i.named and not i.file.startswith(LAB)
            and (top := i.module.split(".")[0]) and top not in ours and top not in sys.stdlib_module_names
            and top not in allowed and top != "__future__"]


def gateway_imports(root: Path, gateways: set[str]) -> list[Import]:
    """Module-level imports of an extra's gateway module by another product module (not the lab)."""
    names = {g.removesuffix(".py").replace("/", ".") for g in gateways}
    return [i for i in all_imports(root) if i.module_level and not i.file.startswith(LAB) and i.module in names]


# --- what DESIGN.md and pyproject.toml say --------------------------------------------------------------------------

def design_lists(text: str) -> dict[str, set[str]]:
    """The bullets of DESIGN.md's "Imports" section, as {bold label: the modules (`*.py` under the three packages)
    it names}; a bullet ends at the next bullet or a blank line."""
    section = text.split("\n## Imports\n", 1)[1].split("\n## ", 1)[0]
    bullets: dict[str, set[str]] = {}
    for paragraph in section.split("\n\n"):
        for bullet in re.split(r"\n(?=\* )", paragraph.strip()):
            label = re.match(r"\* \*\*(.+?)\*\*", bullet)
            if label:
                bullets[label.group(1)] = {path for path in re.findall(r"`([\w/]+\.py)`", bullet)
                                           if path.split("/")[0] in PACKAGES}
    return bullets


@functools.cache
def design() -> dict[str, set[str]]:
    return design_lists((ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8"))


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def import_name(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()
    return IMPORT_NAMES.get(name, name.replace("-", "_"))


def gateways() -> dict[str, set[str]]:
    """extra -> its gateway modules, from DESIGN.md ("**gateway of the tls extra**")."""
    found = {}
    for label, paths in design().items():
        m = re.fullmatch(r"gateway of the (\w+) extra", label)
        if m:
            found[m.group(1)] = paths
    return found


# --- the rules on this repository -------------------------------------------------------------------------------------

def test_the_packages_are_found() -> None:
    assert len(_parse(ROOT)) > 100 and len(all_imports(ROOT)) > 1000


def test_nothing_outside_the_lab_imports_it() -> None:
    found = lab_imports_from_outside(ROOT)
    assert not found, "zkconsumer.lab imported outside zkconsumer/lab (use extras.load from the CLI):\n" + _show(found)


def test_the_cli_names_only_its_listed_lab_entry_points() -> None:
    assert lab_entry_strings_outside(ROOT) == LAB_ENTRY_POINTS


def test_rebalance_and_fetcher_manager_never_import_upwards() -> None:
    found = reversed_edges(ROOT)
    assert not found, "an import against the layers (zkconsumer -> rebalance -> fetcher_manager):\n" + _show(found)


def test_the_lab_rooms_import_only_the_rooms_below_them() -> None:
    found = lab_rooms_upwards(ROOT)
    assert not found, "a lab room imports one above it (docs/architecture.md):\n" + _show(found)


def test_a_lab_room_importing_upwards_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"zkconsumer/lab/members/zk.py": "from zkconsumer.lab.runs.server_info import f\n",
                            "zkconsumer/lab/drivers/zk.py": "from zkconsumer.lab.members import zk\n",
                            "zkconsumer/lab/rules/gaps.py": "def f():\n    import zkconsumer.lab.analysis.job\n",
                            "zkconsumer/lab/runs/session.py": "from zkconsumer.lab.drivers import zk\n"})
    assert _files(lab_rooms_upwards(root)) == ["zkconsumer/lab/members/zk.py", "zkconsumer/lab/rules/gaps.py"]


def test_only_the_named_modules_import_kazoo() -> None:
    assert importers(ROOT, lambda m: _under(m, "kazoo")) == design()["kazoo"]


def test_only_the_named_modules_import_kafka_python_internals() -> None:
    assert kafka_internals_importers(ROOT) == design()["kafka-python internals"]


def test_outside_the_lab_only_core_dependencies_are_imported_at_module_level() -> None:
    core = {import_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert core >= {"kazoo", "kafka", "click"}
    gates = gateways()
    assert set(gates) == {"tls", "watch"}, "DESIGN.md names a gateway per extra the product uses outside the lab"
    found = third_party_at_module_level(ROOT, core)
    allowed = {(g, name) for extra, files in gates.items() for g in files for name in EXTRAS[extra]}
    wrong = [i for i in found if (i.file, i.module.split(".")[0]) not in allowed]
    assert not wrong, "a module-level import of a package `pip install zkconsumer` does not bring:\n" + _show(wrong)
    used = {(i.file, i.module.split(".")[0]) for i in found}
    for extra, files in gates.items():
        assert any((g, name) in used for g in files for name in EXTRAS[extra]), f"{files} import nothing of {extra}"


def test_no_product_module_imports_a_gateway_at_module_level() -> None:
    gates = set().union(*gateways().values())
    found = gateway_imports(ROOT, gates)
    assert not found, "a gateway imported at module level (import it where its extra is required):\n" + _show(found)


def test_the_extras_table_matches_pyproject() -> None:
    optional = PYPROJECT["project"]["optional-dependencies"]
    for extra, names in EXTRAS.items():
        assert {import_name(r) for r in optional[extra]} == set(names), extra
    assert optional["all"] == ["zkconsumer[lab,watch,tls]"]
    core = {import_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not core & set().union(*EXTRAS.values()), "an extra's package is a core dependency again"


# --- each rule fails when broken ------------------------------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "zkconsumer" / "lab").mkdir(exist_ok=True)
    (tmp_path / "zkconsumer" / "lab" / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("text", [
    "from zkconsumer.lab.main_job import X\n",
    "def f():\n    import zkconsumer.lab.cli\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zkconsumer.lab import run\n",
    "from zkconsumer import lab\n",
    "def f():\n    from .lab import main_job\n",
])
def test_a_lab_import_from_the_product_is_found(tmp_path: Path, text: str) -> None:
    root = _tree(tmp_path, {"zkconsumer/cli.py": text, "zkconsumer/lab/x.py": "import zkconsumer.lab.y\n"})
    assert _files(lab_imports_from_outside(root)) == ["zkconsumer/cli.py"]


def test_a_lab_entry_point_string_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"zkconsumer/demo.py": 'import runpy\nrunpy.run_module("zkconsumer.lab.member")\n',
                            "zkconsumer/x.py": '"""Mentions zkconsumer.lab in prose, which is no entry point."""\n'})
    assert lab_entry_strings_outside(root) == {("zkconsumer/demo.py", "zkconsumer.lab.member")}


@pytest.mark.parametrize(("rel", "text"), [
    ("rebalance/listener.py", "from zkconsumer.config import ConsumerConfig\n"),
    ("rebalance/listener.py", "def f():\n    import zkconsumer\n"),
    ("fetcher_manager/manager.py", "from rebalance.events import MemberEvent\n"),
    ("fetcher_manager/manager.py", "def f():\n    from zkconsumer.zookeeper import layout\n"),
])
def test_an_upward_import_is_found(tmp_path: Path, rel: str, text: str) -> None:
    root = _tree(tmp_path, {rel: text, "zkconsumer/ok.py": "import rebalance\nimport fetcher_manager\n",
                            "rebalance/ok.py": "import fetcher_manager\n"})
    assert _files(reversed_edges(root)) == [rel]


def test_an_unnamed_kazoo_or_kafka_internals_importer_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "zkconsumer/zookeeper/client.py": "from kazoo.client import KazooClient\n",
        "zkconsumer/connector.py": "def f():\n    from kazoo.exceptions import NoNodeError\n",
        "zkconsumer/admin.py": "from kafka import KafkaAdminClient\nfrom kafka.errors import KafkaError\n"
                               "from kafka.admin import NewTopic\n",
        "zkconsumer/offsets.py": "def f():\n    from kafka.protocol.metadata import MetadataRequest\n",
        "zkconsumer/codec.py": "from kafka import codec\n",
    })
    kazoo = importers(root, lambda m: _under(m, "kazoo"))
    assert kazoo == {"zkconsumer/zookeeper/client.py", "zkconsumer/connector.py"}
    assert kafka_internals_importers(root) == {"zkconsumer/offsets.py", "zkconsumer/codec.py"}


def test_an_extra_imported_at_module_level_outside_its_gateway_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "zkconsumer/report.py": "import plotly\nimport json\n",
        "zkconsumer/lazy.py": "def f():\n    import pyspark\n",
        "zkconsumer/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n",
        "zkconsumer/embedded/certs.py": "from cryptography import x509\n",
        "zkconsumer/lab/job.py": "import pyspark\n",
        "zkconsumer/cli.py": "import click\nfrom zkconsumer.embedded import certs\n",
    })
    found = third_party_at_module_level(root, {"click"})
    assert [(i.file, i.module) for i in found] == [("zkconsumer/embedded/certs.py", "cryptography"),
                                                   ("zkconsumer/report.py", "plotly")]
    assert _files(gateway_imports(root, {"zkconsumer/embedded/certs.py"})) == ["zkconsumer/cli.py"]


def test_design_lists_are_read_from_the_imports_section() -> None:
    text = ("# x\n\n## Imports\n\n* **kazoo** only in `zkconsumer/b.py` and\n  `rebalance/c.py`; not `d.txt`, "
            "nor `tests/t.py`.\n* **gateway of the tls extra**: `zkconsumer/f.py`\n\nProse `zkconsumer/g.py`.\n\n"
            "## Next\n\n* **kazoo** `zkconsumer/z.py`\n")
    assert design_lists(text) == {"kazoo": {"zkconsumer/b.py", "rebalance/c.py"},
                                  "gateway of the tls extra": {"zkconsumer/f.py"}}
