"""Which resource bounds a join's time to stable: each queue's utilisation during the change (capacity.py).

    .venv/bin/python -m zkconsumer.lab.sim.bounds [PROFILE] [N,...] [SEED]     # e.g. lab 1,4,16,64,128,256 101

prints one join into each N with the profile's queues (`capacity.PROFILES`): its time to stable, conflicts, and
how busy each resource was (docs/simulation.md, "What bounds the ZooKeeper design at each N").
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from zkconsumer.lab.sim.capacity import Capacity, profile
from zkconsumer.lab.sim.zk_sim import ZkSimConfig, simulate_zk


def utilisation(capacity: Capacity, busy_s: Mapping[str, float], seconds: float) -> dict[str, float]:
    """Service each resource gave (`ZkPrediction.busy_s`) over `seconds` and its parallelism (cores, server
    threads); the largest is the bound."""
    slots = {"cores": capacity.cores or 1, "server": capacity.server_threads, "proxy": 1, "host": 1, "log": 1}
    if seconds <= 0:
        return {}
    return {name: busy / (seconds * slots[name]) for name, busy in busy_s.items()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "lab"
    sizes = [int(n) for n in (args[1] if len(args) > 1 else "1,4,16,64,128,256").split(",")]
    seed = int(args[2]) if len(args) > 2 else 101
    capacity = profile(name)
    if capacity is None:
        raise ValueError("a capacity profile is needed")
    print(f"profile {name}, seed {seed}: {capacity}")
    for n in sizes:
        p = simulate_zk(ZkSimConfig(members=n, seed=seed, capacity=capacity, latency=capacity.wire()))
        used = utilisation(capacity, p.busy_s, p.time_to_stable_s or 0.0)
        bound = max(used, key=used.__getitem__) if used else "-"
        shown = "  ".join(f"{k} {v:4.0%}" for k, v in sorted(used.items()))
        print(f"N={n:<6} stable {p.time_to_stable_s:9.3f} s  conflicts {p.conflicts}  {shown}  busiest: {bound}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
