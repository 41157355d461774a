"""The simulation's tests: the ZooKeeper design executed on a virtual clock, the coordinator model, the sweep.

`lab_counts.json` (read by `lab_fixture.py`) holds the per-change counts of real lab runs of the herd scenario,
copied from their wire records with `python -m zkconsumer.lab.sim.calibrate real`, so these tests need no lab
output on disk.
One local[2] SparkSession is shared by the tests that need Spark (it takes seconds to start).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from zkconsumer.lab.sim.sweep import local_session

    session = local_session(2)
    yield session
    session.stop()
