"""The simulation's tests: the ZooKeeper design executed on a virtual clock, the coordinator model, the sweep.

`lab_counts.json` (read by `lab_fixture.py`) holds the per-change counts of real lab runs of the herd scenario,
copied from their wire records with `python -m zkconsumer.lab.sim.calibrate real`, so these tests need no lab
output on disk.
The tests that need Spark use the one session of tests/conftest.py.
"""

from __future__ import annotations
