"""`make demo`: the main job on the embedded default, start to finish, leaving nothing running.

Starts a real ZooKeeper and an Apache Kafka broker, creates a topic, produces keyed messages, consumes them through
a two-member ZooKeeper-balanced group (range assignment), prints who owned what and the group's offsets, shows
the ZooKeeper tree, and stops everything.
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaProducer

from zkconsumer.admin import create_topic
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.embedded.cluster import EmbeddedCluster
from zkconsumer.groups import describe_group
from zkconsumer.logsize import log_end_lookup
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.tree import walk


def _consume(connector: ZookeeperConsumerConnector, topic: str, counts: Counter, total: list[int],
             expected: int, lock: threading.Lock) -> None:
    from fetcher_manager.stream import ConsumerTimeoutError

    stream = connector.create_message_streams({topic: 1})[topic][0]
    try:
        for message in stream:
            with lock:
                counts[(connector.consumer_id, message.partition)] += 1
                total[0] += 1
                if total[0] >= expected:
                    return
    except ConsumerTimeoutError:
        return


def run_demo(echo: Callable[[str], None] = print, base_dir: Path | None = None, topic: str = "demo",
             partitions: int = 4, messages: int = 2000) -> None:
    with tempfile.TemporaryDirectory(prefix="zkconsumer-demo-") as tmp:
        echo("starting the embedded cluster (real ZooKeeper + Apache Kafka broker) ...")
        cluster = EmbeddedCluster.up(base_dir or Path(tmp) / "cluster")
        try:
            echo(f"zookeeper.connect={cluster.zookeeper_connect}")
            echo(f"bootstrap.servers={cluster.bootstrap_servers}")
            with ZkClient(cluster.zookeeper_connect, log_id="demo") as zk:
                create_topic(zk, topic, partitions)
                echo(f"created topic {topic} with {partitions} partitions")
                producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
                for i in range(messages):
                    producer.send(topic, key=f"user-{i % 50}".encode(), value=f"event-{i}".encode())
                producer.flush()
                producer.close()
                echo(f"produced {messages} keyed messages")

                props = {"group.id": "demo-group", "zookeeper.connect": cluster.zookeeper_connect,
                         "auto.offset.reset": "smallest", "consumer.timeout.ms": 5000,
                         "rebalance.backoff.ms": 500, "zookeeper.session.timeout.ms": 6000}
                counts: Counter = Counter()
                total = [0]
                lock = threading.Lock()
                members = [ZookeeperConsumerConnector(ConsumerConfig.from_properties({**props, "consumer.id": name}))
                           for name in ("alice", "bob")]
                try:
                    threads = [threading.Thread(target=_consume, args=(m, topic, counts, total, messages, lock),
                                                name=f"{m.consumer_id}-demo") for m in members]
                    for thread in threads:
                        thread.start()
                    for thread in threads:
                        thread.join()
                    echo(f"consumed {total[0]} messages with a two-member group (range assignment):")
                    for member in members:
                        owned = ", ".join(f"{t}-{p} -> {owner}" for (t, p), owner in member.owned_partitions().items())
                        echo(f"  {member.consumer_id} owns {owned or 'nothing'}")
                    for (consumer, partition), n in sorted(counts.items()):
                        echo(f"  {consumer} consumed {n} messages from partition {partition}")
                    for member in members:
                        member.commit_offsets()
                    echo("group offsets (zkconsumer groups describe):")
                    echo("  Group Topic Pid Offset logSize Lag Owner")
                    for row in describe_group(zk, "demo-group", log_end_lookup(zk)):
                        echo(f"  {row.group} {row.topic} {row.partition} {row.offset} {row.log_size} {row.lag} "
                             f"{row.owner or 'none'}")
                    echo("ZooKeeper tree while the group is up:")
                    for node in walk(zk, "/"):
                        echo("  " + node.format(max_data=110))
                finally:
                    for member in members:
                        member.shutdown()
        finally:
            stopped = cluster.down()
            echo("stopped " + ", ".join(stopped))
