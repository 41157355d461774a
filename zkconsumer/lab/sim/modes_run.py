"""Simulate the ZooKeeper design with an opt-in mode, when asked (the sweep and `lab analyze`'s predictions simulate
the faithful mode only): one change per group size, one line each (docs/simulation.md, "Opt-in modes").

    .venv/bin/python -m zkconsumer.lab.sim.modes_run --members 16,1000,10000 --mode incremental+sticky --churn join
"""

from __future__ import annotations

import argparse
import json
import resource
from typing import Any

from zkconsumer.lab.rules.join_cost import original_join_requests
from zkconsumer.lab.sim.capacity import PROFILES
from zkconsumer.lab.sim.zk_config import CHURN_KINDS, ZkSimConfig
from zkconsumer.lab.sim.zk_sim import simulate_zk

FIELDS = ("members", "churn", "requests", "notifications", "settled", "time_to_stable_s", "partitions_moved",
          "rebalances", "attempts", "conflicts", "failed_attempts", "wall_s")


def one(members: int, mode: str, churn: str, seed: int, partitions: int, capacity: str | None) -> dict[str, Any]:
    cap = None if capacity is None else PROFILES[capacity]
    extra: dict[str, Any] = {} if cap is None else {"capacity": cap, "latency": cap.wire()}
    p = simulate_zk(ZkSimConfig(members=members, partitions=partitions, churn=churn, seed=seed, mode=mode, **extra))
    row = {name: getattr(p, name) for name in FIELDS}
    row.update(mode=mode, seed=seed, capacity=capacity, requests_by_op=p.requests_by_op, busy_s=p.busy_s,
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    if churn == "join":
        row["x_original"] = round(p.requests / original_join_requests(members + 1, partitions), 4)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="16", help="group sizes before the change, comma-separated")
    parser.add_argument("--mode", default="incremental+sticky", help="a mode of zkconsumer/modes.py, '+' combines")
    parser.add_argument("--churn", default="join", choices=CHURN_KINDS)
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument("--partitions", type=int, default=72)
    parser.add_argument("--capacity", default=None, choices=sorted(PROFILES), help="queues (capacity.py); none")
    args = parser.parse_args(argv)
    for members in (int(n) for n in args.members.split(",") if n.strip()):
        print(json.dumps(one(members, args.mode, args.churn, args.seed, args.partitions, args.capacity)), flush=True)


if __name__ == "__main__":
    main()
