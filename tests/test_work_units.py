"""How `make test` spreads the suite over its workers (tests/work_units.py): the unit rule, the order, and a tiny
suite run on two real workers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from work_units import expensive_units_first, unit_of

TESTS = Path(__file__).parent


@pytest.mark.parametrize(("nodeid", "unit"), [
    ("tests/test_config.py::test_x", "tests/test_config.py"),
    ("tests/lab/test_actions.py::test_y[zk]", "tests/lab/test_actions.py"),
    ("tests/analysis/test_report.py::test_z", "tests/analysis/"),
    ("tests/analysis/spark_oracle/test_w.py::test_v", "tests/analysis/"),
    ("tests/lesson/test_lesson_page.py::T::test_u", "tests/lesson/"),
    ("tests/analysisx/test_t.py::test_s", "tests/analysisx/test_t.py"),
])
def test_a_unit_is_a_file_or_a_directory_that_shares_session_results(nodeid: str, unit: str) -> None:
    assert unit_of(nodeid) == unit


@dataclass
class _Item:
    nodeid: str
    markers: list[str] = field(default_factory=list)

    def iter_markers(self):
        return [SimpleNamespace(name=name) for name in self.markers]  # a mark is read for its name alone


def test_units_with_an_expensive_test_go_first_and_each_unit_stays_whole() -> None:
    items = [_Item("tests/test_a.py::t1"), _Item("tests/test_a.py::t2"),
             _Item("tests/test_b.py::t1"), _Item("tests/test_b.py::t2", ["slow"]),
             _Item("tests/analysis/test_c.py::t1"), _Item("tests/analysis/test_d.py::t1", ["interop"]),
             _Item("tests/test_e.py::t1", ["ensemble"]), _Item("tests/test_f.py::t1", ["parametrize"])]
    ordered = [item.nodeid for item in expensive_units_first(items)]
    assert ordered == ["tests/test_b.py::t1", "tests/test_b.py::t2", "tests/analysis/test_c.py::t1",
                       "tests/analysis/test_d.py::t1", "tests/test_e.py::t1",
                       "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_f.py::t1"]


@pytest.mark.slow
def test_two_workers_keep_a_shared_directory_together_and_start_with_the_expensive_units(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the plugin, xdist's loadfile hands test_a.py and test_b.py, the first two units, one to each worker;
    without its order, the second worker starts on test_quick_0.py, collected before test_slow.py."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts a process\n")
    shared = "import pytest\npytestmark = pytest.mark.slow\n" + "".join(
        f"def test_{i}():\n    pass\n" for i in range(3))
    quick = "".join(f"def test_{i}():\n    pass\n" for i in range(6))
    pytester.makepyfile(**{"tests/analysis/test_a": shared, "tests/analysis/test_b": shared,
                           "tests/test_quick_0": quick, "tests/test_quick_1": quick,
                           "tests/test_slow": "import pytest\n\n@pytest.mark.slow\ndef test_0():\n    pass\n"})
    result = pytester.runpytest_subprocess("-p", "work_units", "-n", "2", "--dist", "loadfile", "-v",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=19)
    ran = [(m.group(1), m.group(2)) for m in re.finditer(r"\[(gw\d)\][^\n]*?PASSED (\S+)", result.stdout.str())]
    assert len(ran) == 19, result.stdout.str()
    workers_of_shared = {worker for worker, nodeid in ran if nodeid.startswith("tests/analysis/")}
    assert len(workers_of_shared) == 1, ran
    # The first unit of each worker is handed out before any other, in the order the workers collected: with
    # the expensive units first, neither worker starts on a quick file.
    first = {worker: nodeid for worker, nodeid in reversed(ran)}
    assert len(first) == 2 and not any(nodeid.startswith("tests/test_quick") for nodeid in first.values()), ran
