"""Topic administration the way a ZooKeeper-mode Kafka cluster does it, for the embedded broker.

Against a real ZooKeeper-mode Kafka (docker-compose) the broker's controller writes ZooKeeper itself, so we
only create the topic through the broker. The embedded tansu broker knows nothing of ZooKeeper, so for it we
also write `/brokers/topics/<t>` and each partition's `state`, as a controller would. A `/controller` node
tells the two apart.
"""

from __future__ import annotations

import logging
import random
import time

from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import NodeExistsError, ZkClient
from zkconsumer.zookeeper.group import read_brokers

log = logging.getLogger(__name__)


class AdminError(RuntimeError):
    """A one-line, user-facing failure of a topic or broker lookup."""


def bootstrap_from_zookeeper(zk: ZkClient) -> str:
    brokers = read_brokers(zk, skip_bad=True)
    if not brokers:
        raise AdminError(f"no broker registered under {layout.BROKER_IDS} in {zk.connect}: start one "
                         "(zkconsumer cluster up) or pass --bootstrap")
    return ",".join(b.address for b in brokers)


def _admin(bootstrap: str):  # -> KafkaAdminClient; kafka-python is imported only when a command needs it
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="zkconsumer-admin",
                                request_timeout_ms=15000)
    except KafkaError as exc:
        raise AdminError(f"cannot reach a broker at {bootstrap} ({exc}): check --bootstrap") from None


def create_topic(zk: ZkClient, topic: str, partitions: int, bootstrap: str | None = None,
                 replication_factor: int = 1) -> bool:
    """Create `topic`; returns False if it already existed with a ZooKeeper entry. Raises AdminError."""
    if partitions < 1:
        raise AdminError(f"--partitions must be at least 1, got {partitions}")
    if not topic or any(not (c.isalnum() or c in "._-") for c in topic) or topic in (".", ".."):
        raise AdminError(f"invalid topic name {topic!r}: use letters, digits, '.', '_' and '-'")
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    bootstrap = bootstrap or bootstrap_from_zookeeper(zk)
    admin = _admin(bootstrap)
    created = True
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor)])
    except TopicAlreadyExistsError:
        created = False
    except KafkaError as exc:
        raise AdminError(f"the broker at {bootstrap} refused to create {topic!r}: {exc}") from None
    finally:
        admin.close()

    path = layout.topic_path(topic)
    if zk.exists(layout.CONTROLLER):
        # A real Kafka controller writes the topic's znodes; wait for them so callers can rely on ZooKeeper.
        deadline = time.monotonic() + 30
        while not zk.exists(path):
            if time.monotonic() > deadline:
                raise AdminError(f"{path} did not appear within 30 s although the broker created {topic!r}")
            time.sleep(0.1)
        return created
    leaders = [b.id for b in read_brokers(zk, skip_bad=True)] or [random.randint(0, 1 << 30)]
    replicas = {p: [leaders[p % len(leaders)]] for p in range(partitions)}
    try:
        zk.create(path, codecs.encode_topic(replicas))
    except NodeExistsError:
        return False
    for p, replica_ids in replicas.items():
        zk.set(layout.partition_state_path(topic, p), codecs.encode_partition_state(replica_ids[0], replica_ids))
    log.info("created topic %s with %d partitions", topic, partitions)
    return True
