"""How `make test` spreads the suite over its pytest-xdist workers (docs/testing.md, "Workers"): a pytest
plugin, loaded by tests/conftest.py.

A work unit is one test file, as with xdist's `--dist loadfile`, so a module's fixtures start once and on one
worker. Two directories are one unit each, because their conftest makes session-scoped results that their files
share and that cost tens of seconds: the Spark analyses of tests/analysis and the lesson's lab runs of tests/lesson.
Split over the workers, each would make them again. The session's servers (tests/conftest.py) are started once per
worker that needs them: part of the price of running several at a time.

Units go out in the order the workers collected them, and each worker puts every unit that starts a server or
another process (a test marked `slow`, `ensemble` or `interop`) before the server-free ones. The long units are
handed out first and the many short ones fill in at the end, so no worker is left alone with a long file at the
end while the other idles.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

# Directories whose files share session-scoped results of their own conftest.py.
SHARED_SESSION_DIRS = ("tests/analysis/", "tests/lesson/")
EXPENSIVE_MARKERS = frozenset({"slow", "ensemble", "interop"})


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its directory when that is one of SHARED_SESSION_DIRS, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((directory for directory in SHARED_SESSION_DIRS if path.startswith(directory)), path)


def expensive_units_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` with every unit holding an expensive test before the others; the order is otherwise kept, so a
    module's tests stay together (its fixtures are set up once) and every worker arrives at the same order."""
    costly = {unit_of(item.nodeid) for item in items
              if EXPENSIVE_MARKERS.intersection(mark.name for mark in item.iter_markers())}
    return sorted(items, key=lambda item: unit_of(item.nodeid) not in costly)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A worker: every worker collects, and each must arrive at the same order.
        items[:] = expensive_units_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile` with `unit_of` as the unit; any other `--dist` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    # Units in collection order: xdist would otherwise send those with the most tests first, which here are the
    # quick server-free ones.
    config.option.loadscopereorder = False
    return UnitScheduling(config, log)
