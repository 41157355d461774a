"""Topics on the KRaft broker, for the designs that run there (designs.py: cooperative, consumer protocol).

`zkconsumer.admin` creates topics through the brokers and then waits for the topic znodes, because a 0.8 consumer
reads topics and leaders from ZooKeeper only. A KRaft cluster has no such znodes: its members learn topics from
Metadata, so here a change is done when Metadata shows every partition of the topic with a leader. Requests go to
the broker's own listener (`bootstrap`), never through the counting proxy: they are nobody's membership cost.

librdkafka's admin client (confluent-kafka) speaks what a Kafka 4 broker accepts; the designs that use this module
need it for their members anyway.
"""

from __future__ import annotations

import time

from zkconsumer.admin import AdminError

METADATA_WAIT_S = 30.0
_REQUEST_TIMEOUT_S = 15.0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """CreateTopics (replication 1), then wait until Metadata shows each partition led."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  request_timeout=_REQUEST_TIMEOUT_S)
    _result(futures[topic], bootstrap, f"create {topic!r}")
    wait_partitions(bootstrap, topic, partitions, admin)


def alter_partitions(bootstrap: str, topic: str, total: int) -> None:
    """CreatePartitions up to `total`, then wait until Metadata shows the new partitions led."""
    from confluent_kafka.admin import NewPartitions

    admin = _admin(bootstrap)
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=_REQUEST_TIMEOUT_S)
    _result(futures[topic], bootstrap, f"grow {topic!r} to {total} partitions")
    wait_partitions(bootstrap, topic, total, admin)


def wait_partitions(bootstrap: str, topic: str, partitions: int, admin=None) -> None:
    admin = admin or _admin(bootstrap)
    deadline = time.monotonic() + METADATA_WAIT_S
    while True:
        metadata = admin.list_topics(topic, timeout=_REQUEST_TIMEOUT_S).topics.get(topic)
        led = [] if metadata is None or metadata.error else [p for p in metadata.partitions.values() if p.leader >= 0]
        if len(led) >= partitions:
            return
        if time.monotonic() > deadline:
            raise AdminError(f"topic {topic!r} on the KRaft broker at {bootstrap}: {len(led)} of {partitions} "
                             f"partitions have a leader after {METADATA_WAIT_S:.0f} s; see the broker's log")
        time.sleep(0.05)


def _admin(bootstrap: str):  # -> confluent_kafka.admin.AdminClient, imported only when a KRaft design runs
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "zkconsumer-admin"})


def _result(future, bootstrap: str, what: str) -> None:
    from confluent_kafka import KafkaException

    try:
        future.result()
    except KafkaException as exc:
        raise AdminError(f"the KRaft broker at {bootstrap} refused to {what}: {exc.args[0].str()}") from None
