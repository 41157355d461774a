"""The designs the lab compares, named once.

    "zk"           the ZooKeeper design, members running this project's connector
    "original"     the ZooKeeper design, members running Kafka 0.8.2.2's own ZookeeperConsumerConnector
                   (docs/interop.md): the reference ours is measured against, on the same servers and proxies
    "coordinator"  the broker-side GroupCoordinator design, members running kafka-python's KafkaConsumer

"zk" and "original" are the same protocol (the znodes, watches and owner claims of docs/zk-design.md), so
everything that reads the ZooKeeper design's wire traffic, owner nodes or registrations applies to both:
ask `is_zookeeper_design`, never compare with "zk".
"""

from __future__ import annotations

DESIGNS: tuple[str, ...] = ("zk", "original", "coordinator")
ZOOKEEPER_DESIGNS: tuple[str, ...] = ("zk", "original")
# What a scenario runs when its file names no designs: this project against the coordinator. The original needs a
# JDK and a JVM per member, so a scenario (or `lab run --design`) asks for it by name.
DEFAULT_DESIGNS: tuple[str, ...] = ("zk", "coordinator")
# Column headings for people (tables, the report, the lesson page).
LABELS: dict[str, str] = {
    "zk": "ZooKeeper (zkconsumer)",
    "original": "ZooKeeper (original 0.8.2.2)",
    "coordinator": "GroupCoordinator",
}


def is_zookeeper_design(design: str) -> bool:
    return design in ZOOKEEPER_DESIGNS
