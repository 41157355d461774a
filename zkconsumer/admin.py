"""Topic administration as Kafka's `kafka-topics` does it against a ZooKeeper-mode cluster.

Changes go to the brokers' admin API (CreateTopics, CreatePartitions); the controller then writes the topic's
znodes, and we wait for them, leaders included, so that a caller can rely on ZooKeeper as soon as we return (a
0.8 consumer reads topics and leaders from ZooKeeper only). Listing and describing read ZooKeeper, as
`kafka-topics --zookeeper` did.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass

from zkconsumer.errors import UserError
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_brokers

log = logging.getLogger(__name__)
ZNODE_WAIT_S = 30.0


class AdminError(UserError, RuntimeError):
    """A one-line, user-facing failure of a topic or broker lookup."""


class TopicExistsError(AdminError):
    """`topic create` of a topic that exists (kafka-topics exits non-zero too)."""


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None  # None: no leader (-1 in ZooKeeper) or no state yet
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def bootstrap_from_zookeeper(zk: ZkClient) -> str:
    brokers = read_brokers(zk, skip_bad=True)
    if not brokers:
        raise AdminError(f"no broker registered under {layout.BROKER_IDS} in {zk.connect}: start one "
                         "(zkconsumer cluster up) or pass --bootstrap")
    return ",".join(b.address for b in brokers)


def check_reachable(bootstrap: str, timeout_s: float = 5.0) -> None:
    """Fail in one line, within `timeout_s`, when no bootstrap address accepts a TCP connection: kafka-python
    would otherwise retry its bootstrap for half a minute before failing."""
    deadline = time.monotonic() + timeout_s
    addresses = [a.strip().rpartition(":") for a in bootstrap.split(",") if a.strip()]
    while True:
        for host, _, port in addresses:
            try:
                socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0).close()
                return
            except (OSError, ValueError):
                continue
        if time.monotonic() >= deadline:
            raise AdminError(f"no broker reachable at {bootstrap} within {timeout_s:.0f} s: check --bootstrap and "
                             "that the broker is up (zkconsumer cluster status)")
        time.sleep(0.2)


def _admin(bootstrap: str):  # -> KafkaAdminClient; kafka-python is imported only when a command needs it
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    check_reachable(bootstrap)
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="zkconsumer-admin",
                                request_timeout_ms=15000)
    except KafkaError as exc:
        raise AdminError(f"cannot reach a broker at {bootstrap} ({exc}): check --bootstrap") from None


def _with_admin(zk: ZkClient, bootstrap: str | None, request, what: str) -> None:
    """Run `request(admin)` against the brokers; a refusal becomes one AdminError line. TopicAlreadyExistsError
    passes through, for `create_topic` to word."""
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    bootstrap = bootstrap or bootstrap_from_zookeeper(zk)
    admin = _admin(bootstrap)
    try:
        request(admin)
    except TopicAlreadyExistsError:
        raise
    except KafkaError as exc:
        raise AdminError(f"the broker at {bootstrap} refused to {what}: {exc}") from None
    finally:
        admin.close()


def _check_name(topic: str) -> None:
    if not topic or any(not (c.isalnum() or c in "._-") for c in topic) or topic in (".", ".."):
        raise AdminError(f"invalid topic name {topic!r}: use letters, digits, '.', '_' and '-'")


def _wait_partitions(zk: ZkClient, topic: str, partitions: int) -> None:
    """Until the controller has written `partitions` partitions of `topic` and every one has a leader."""
    deadline = time.monotonic() + ZNODE_WAIT_S
    while True:
        infos = describe_topic(zk, topic)
        if len(infos) >= partitions and all(p.leader is not None for p in infos):
            return
        if time.monotonic() > deadline:
            raise AdminError(f"the controller did not write {partitions} partitions of {topic!r} with leaders to "
                             f"ZooKeeper within {ZNODE_WAIT_S:.0f} s (found {len(infos)}): is a broker up?")
        time.sleep(0.05)


def create_topic(zk: ZkClient, topic: str, partitions: int, bootstrap: str | None = None,
                 replication_factor: int = 1) -> None:
    """Create `topic` through the brokers and wait for its znodes. Raises TopicExistsError or AdminError."""
    if partitions < 1:
        raise AdminError(f"--partitions must be at least 1, got {partitions}")
    _check_name(topic)
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    try:
        _with_admin(zk, bootstrap, lambda admin: admin.create_topics([NewTopic(topic, partitions, replication_factor)]),
                    f"create {topic!r}")
    except TopicAlreadyExistsError:
        raise TopicExistsError(f"topic {topic!r} already exists: use `zkconsumer topic alter` to add "
                               "partitions") from None
    _wait_partitions(zk, topic, partitions)
    log.info("created topic %s with %d partitions", topic, partitions)


def alter_partitions(zk: ZkClient, topic: str, total: int, bootstrap: str | None = None) -> None:
    """`kafka-topics --alter --partitions total`: CreatePartitions, then wait for the new partitions' znodes."""
    _check_name(topic)
    current = len(describe_topic(zk, topic))
    if current == 0:
        raise AdminError(f"topic {topic!r} does not exist: create it with `zkconsumer topic create`")
    if total <= current:
        raise AdminError(f"topic {topic!r} has {current} partitions; --partitions must be more (Kafka never "
                         "removes partitions)")
    from kafka.admin import NewPartitions

    _with_admin(zk, bootstrap, lambda admin: admin.create_partitions({topic: NewPartitions(total_count=total)}),
                f"grow {topic!r} to {total} partitions")
    _wait_partitions(zk, topic, total)
    log.info("topic %s now has %d partitions", topic, total)


def existing_topics(bootstrap: str) -> set[str]:
    """The topics the brokers know (one Metadata request)."""
    from kafka.errors import KafkaError

    admin = _admin(bootstrap)
    try:
        return set(admin.list_topics())
    except KafkaError as exc:
        raise AdminError(f"the broker at {bootstrap} did not list its topics: {exc}") from None
    finally:
        admin.close()


def list_topics(zk: ZkClient) -> list[str]:
    return sorted(zk.get_children(layout.BROKER_TOPICS) or [])


def describe_topic(zk: ZkClient, topic: str) -> list[PartitionInfo]:
    """Partitions of `topic` from ZooKeeper (replicas from the topic znode, leader and ISR from each partition's
    state); [] if the topic does not exist."""
    path = layout.topic_path(topic)
    found = zk.get(path)
    if found is None:
        return []
    replicas = _replica_map(path, found[0])
    infos = []
    for partition in sorted(replicas):
        state = zk.get(layout.partition_state_path(topic, partition))
        leader, isr = None, ()
        if state is not None:
            try:
                data = json.loads(state[0])
                leader = int(data["leader"]) if int(data["leader"]) >= 0 else None
                isr = tuple(int(i) for i in data.get("isr", []))
            except (ValueError, KeyError, TypeError):
                leader, isr = None, ()
        infos.append(PartitionInfo(partition, leader, tuple(replicas[partition]), isr))
    return infos


def _replica_map(path: str, raw: bytes | None) -> dict[int, list[int]]:
    try:
        data = json.loads(raw or b"")
        return {int(p): [int(r) for r in rs] for p, rs in data["partitions"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise codecs.ZnodeDataError(path, raw, f"not a topic registration ({exc})") from None
