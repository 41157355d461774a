"""The host process around a simulation: a garbage collector that stays out of the way of 10,000 members'
long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection while the settled group is built: everything it makes lives on, so each full
    collection walks the growing group again for nothing, and building makes almost no cyclic garbage
    (docs/simulation.md measures both). Restores the collector's previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def long_lived_heap() -> Iterator[None]:
    """After the settled group is built, its objects live until the end: move them out of the collector's way
    (`gc.freeze`), and collect young objects less often. Full collections over 10,000 members' objects otherwise
    cost more than the simulation.

    Only the young generations are collected before the freeze: the garbage of building the group is young, and a
    full collection walks the whole heap of the process, which in a Spark worker (pyarrow, pandas, py4j) cost
    more than a small group's whole simulation. Older garbage frozen with the group is freed after `unfreeze`."""
    thresholds = gc.get_threshold()
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(max(thresholds[0], 50_000), thresholds[1], thresholds[2])
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
