"""The host process around a simulation: one CPU for its threads, and a garbage collector that stays out of
the way of 10,000 members' long-lived objects."""

from __future__ import annotations

import fcntl
import gc
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def one_cpu() -> Iterator[None]:
    """Pin the calling thread, and so every worker thread it starts, to one CPU. Only one simulated thread runs at
    a time anyway; on one CPU a baton pass is a local wake-up instead of a cross-CPU one, which on a virtual
    machine is several times slower. Simulations running side by side (Spark tasks) take different CPUs: each
    holds a lock file per CPU while it runs."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    held = None
    for cpu in sorted(allowed):
        handle = open(Path(tempfile.gettempdir()) / f"zkconsumer-sim-cpu{cpu}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        held = (cpu, handle)
        break
    cpu = held[0] if held else sorted(allowed)[os.getpid() % len(allowed)]  # all taken: share one
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)
        if held:
            held[1].close()  # closing releases the lock


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
