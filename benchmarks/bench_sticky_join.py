"""One join into a settled group, per configuration, over the in-memory ZooKeeper (no server, no fetchers): the
ZooKeeper requests the group spends on the join and the partitions whose owner changed, beside the original 0.8.2.2
consumer's closed form for the same join (`zkconsumer.lab.rules.join_cost.original_join_requests`, checked against real
original runs in tests/lab). Members are rebalance-only (`NoFetchers`), as `lab run --members threads`.

    .venv/bin/python benchmarks/bench_sticky_join.py [--members 16] [--partitions 72] [--repeats 3]

An indication for the sticky assignor (docs/modes.md, "The sticky assignor"), not the lab's side-by-side
measurement against real original members on real servers.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rebalance.assignors import get_assignor  # noqa: E402
from rebalance.convergence import check_convergence  # noqa: E402
from zkconsumer.config import ConsumerConfig  # noqa: E402
from zkconsumer.connector import ZookeeperConsumerConnector  # noqa: E402
from zkconsumer.lab.rules.join_cost import original_join_requests  # noqa: E402
from zkconsumer.members import NoFetchers  # noqa: E402
from zkconsumer.zookeeper import codecs, layout  # noqa: E402
from zkconsumer.zookeeper.group import read_group_snapshot  # noqa: E402
from zkconsumer.zookeeper.memory import MemoryZkClient, MemoryZooKeeper  # noqa: E402

BROKER = b'{"version":1,"host":"127.0.0.1","port":9092,"jmx_port":-1}'
STICKY = {"partition.assignment.strategy": "sticky"}
INCREMENTAL = {"zkconsumer.incremental.ownership": "true"}
CASES = {
    "range (faithful)": {},
    "range + incremental": INCREMENTAL,
    "sticky": STICKY,
    "sticky + incremental": {**STICKY, **INCREMENTAL},
    "sticky + incremental + claim-on-deletion": {**STICKY, **INCREMENTAL, "zkconsumer.claim.on.deletion": "true"},
}


def requests(member: ZookeeperConsumerConnector) -> int:
    return sum(v for k, v in member.zk.op_counts().items() if ":" not in k)  # watch:* are notifications


def one_join(members: int, partitions: int, properties: dict[str, str]) -> tuple[int, int]:
    server = MemoryZooKeeper()
    admin = MemoryZkClient(server, log_id="admin").start()
    admin.create(layout.broker_path(1), BROKER, ephemeral=True)
    admin.create(layout.topic_path("t"), codecs.encode_topic({p: [1] for p in range(partitions)}))
    assignor = get_assignor(properties.get("partition.assignment.strategy", "range"))
    group: list[ZookeeperConsumerConnector] = []

    def start(name: str) -> None:
        config = ConsumerConfig.from_properties({
            "group.id": "g", "zookeeper.connect": "memory:2181", "consumer.id": name, "auto.commit.enable": "false",
            "zookeeper.session.timeout.ms": "6000", "rebalance.backoff.ms": "20", "rebalance.max.retries": "10",
            **properties})
        member = ZookeeperConsumerConnector(
            config, zk_factory=lambda cfg, cid: MemoryZkClient(server, session_timeout_ms=6000, log_id=cid),
            fetcher_factory=NoFetchers)
        group.append(member)
        member.create_message_streams({"t": 1})

    def settled() -> dict:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snapshot = read_group_snapshot(admin, "g")
            if (len(snapshot.registrations) == len(group) and check_convergence(snapshot, assignor).settled
                    and all(m.state == "owning" and m.zk.wait_idle(1) for m in group)):
                return dict(snapshot.owners)
            time.sleep(0.05)
        raise TimeoutError("the group did not settle within 60 s")

    try:
        for i in range(members):
            start(f"c{i:03d}")
        before_owners = settled()
        before = sum(requests(m) for m in group)
        start(f"c{members:03d}")
        after_owners = settled()
        spent = sum(requests(m) for m in group) - before
        return spent, sum(1 for tp, owner in after_owners.items() if before_owners.get(tp) != owner)
    finally:
        for member in group:
            member.shutdown()
        admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=16, help="members before the join")
    parser.add_argument("--partitions", type=int, default=72)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    original = original_join_requests(args.members + 1, args.partitions)
    print(f"one join into {args.members} over {args.partitions} partitions; the original's closed form: {original}")
    print(f"{'configuration':42s} {'requests (each repeat)':28s} {'median':>7s} {'x original':>10s} {'moved':>6s}")
    for name, properties in CASES.items():
        runs = [one_join(args.members, args.partitions, properties) for _ in range(args.repeats)]
        median = statistics.median(spent for spent, _ in runs)
        print(f"{name:42s} {', '.join(str(s) for s, _ in runs):28s} {median:7.0f} {median / original:10.2f} "
              f"{', '.join(str(m) for _, m in runs):>6s}")


if __name__ == "__main__":
    main()
