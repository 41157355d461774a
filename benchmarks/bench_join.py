"""One member joining a live group with the default auto-commit and backoff: from its registration to owning its
partitions, per mode (docs/modes.md), side by side on the same servers.

The incumbents consume a steady load, so each commits before it releases (the release race of 0.8.2: the joiner's
claim lands before the incumbents' deletes, conflicts, and sleeps `rebalance.backoff.ms`). Every member runs in
this process, with real fetchers. For each mode, `--joins` joiners join one after another (each leaves again once
the group has settled); the modes alternate, so a change in the machine's load falls on all of them alike.

    .venv/bin/python benchmarks/bench_join.py [--modes faithful,claim-on-deletion] [--incumbents 4] [--joins 5]

Reported per mode: the median and maximum of registration -> owning, the joiners' failed attempts, and whether any
incumbent failed an attempt (it should not: "incumbents unaffected").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kafka import KafkaProducer  # noqa: E402

from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector  # noqa: E402
from zkconsumer.admin import create_topic  # noqa: E402
from zkconsumer.embedded.kafka import KafkaBroker  # noqa: E402
from zkconsumer.embedded.zookeeper import ZooKeeperEnsemble  # noqa: E402
from zkconsumer.modes import mode_properties  # noqa: E402
from zkconsumer.zookeeper import layout  # noqa: E402
from zkconsumer.zookeeper.client import ZkClient  # noqa: E402

TOPIC = "join-bench"


def member(connect: str, group: str, name: str, mode: str) -> ZookeeperConsumerConnector:
    # The defaults of 0.8.2 for what matters here: auto-commit on, rebalance.backoff.ms = zookeeper.sync.time.ms.
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties({
        "group.id": group, "zookeeper.connect": connect, "consumer.id": name, "auto.offset.reset": "smallest",
        "rebalance.max.retries": 10, **mode_properties(mode)}))


def drain(connector: ZookeeperConsumerConnector, stop: threading.Event) -> threading.Thread:
    stream = connector.create_message_streams({TOPIC: 1})[TOPIC][0]

    def run() -> None:
        try:
            for _ in stream:
                if stop.is_set():
                    return
        except Exception:  # the stream ends at shutdown
            return

    thread = threading.Thread(target=run, name=f"drain-{connector.consumer_id}", daemon=True)
    thread.start()
    return thread


def settled(zk: ZkClient, group: str, members: int, partitions: int) -> bool:
    owners = {zk.get(f"{layout.owners_dir(group, TOPIC)}/{p}") for p in range(partitions)}
    return None not in owners and len({o[0] for o in owners if o}) == members


def wait(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle in 60 s")
        time.sleep(0.05)


def one_join(connect: str, zk: ZkClient, group: str, mode: str, incumbents: list, index: int,
             partitions: int) -> tuple[float, int, int]:
    before = [c.rebalance_stats.failed_attempts for c in incumbents]
    joiner = member(connect, group, f"joiner{index}", mode)
    stamps: dict[str, float] = {}

    def on_event(event) -> None:
        if event.kind == "state" and event.data.get("state") in ("registering", "owning"):
            stamps.setdefault(event.data["state"], event.monotonic)

    joiner.add_event_listener(on_event)
    stop = threading.Event()
    drain(joiner, stop)
    wait(lambda: settled(zk, group, len(incumbents) + 1, partitions))
    took = stamps["owning"] - stamps["registering"]
    failed = joiner.rebalance_stats.failed_attempts
    # the incumbents' failed attempts of this join (the leave below is not measured)
    hurt = sum(c.rebalance_stats.failed_attempts - b for c, b in zip(incumbents, before, strict=True))
    stop.set()
    joiner.shutdown()
    wait(lambda: settled(zk, group, len(incumbents), partitions))
    return took, failed, hurt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="faithful,claim-on-deletion,incremental+claim-on-deletion")
    parser.add_argument("--incumbents", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--joins", type=int, default=5)
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second produced meanwhile")
    args = parser.parse_args()
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-join-") as tmp:
        ensemble = ZooKeeperEnsemble.plan(Path(tmp) / "zk", size=1)
        ensemble.start()
        broker = KafkaBroker.plan(Path(tmp), 1, ensemble.connect_string)
        zk = ZkClient(ensemble.connect_string, log_id="bench-join").start()
        stop = threading.Event()
        groups: dict[str, list] = {}
        try:
            broker.start()
            broker.wait_ready(lambda i: zk.exists(layout.broker_path(i)))
            create_topic(zk, TOPIC, args.partitions, broker.bootstrap)
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)

            def produce() -> None:
                n = 0
                while not stop.wait(1.0 / args.rate):
                    producer.send(TOPIC, b"%d" % n, partition=n % args.partitions)
                    n += 1

            threading.Thread(target=produce, name="bench-join-load", daemon=True).start()
            for mode in modes:  # one group of incumbents per mode, all consuming the same load
                group = f"join-{mode.replace('+', '-')}-{os.getpid()}"
                groups[mode] = [member(ensemble.connect_string, group, f"m{i}", mode) for i in range(args.incumbents)]
                for c in groups[mode]:
                    drain(c, stop)
                wait(lambda g=group: settled(zk, g, args.incumbents, args.partitions))
            results: dict[str, list[tuple[float, int, int]]] = {m: [] for m in modes}
            for index in range(args.joins):
                for mode in modes:
                    group = groups[mode][0].config.group_id
                    results[mode].append(one_join(ensemble.connect_string, zk, group, mode, groups[mode], index,
                                                  args.partitions))
            print(f"{'mode':42} {'reg->own median s':>18} {'max s':>7} {'joiner failed':>14} {'incumbents failed':>18}")
            for mode, rows in results.items():
                took = [r[0] for r in rows]
                print(f"{mode:42} {statistics.median(took):18.3f} {max(took):7.3f} {sum(r[1] for r in rows):14d} "
                      f"{sum(r[2] for r in rows):18d}")
            print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        finally:
            stop.set()
            for members in groups.values():
                for c in members:
                    c.shutdown()
            zk.close()
            broker.stop()
            ensemble.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
