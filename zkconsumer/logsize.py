"""Log end offsets ("logSize") for group inspection, from each partition's leader.

On tansu, ListOffsets(latest) is too low for multi-record batches; `KafkaWire.offset_for` takes the larger of
it and a Fetch high watermark, which is right on both tansu and Apache Kafka.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from fetcher_manager.kafka_wire import BrokerError, KafkaWire, WireError
from zkconsumer.groups import LogEndLookup
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_brokers


def log_end_lookup(zk: ZkClient, socket_timeout_ms: int = 5000) -> LogEndLookup:
    def lookup(partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        wanted = list(partitions)
        brokers = read_brokers(zk, skip_bad=True)
        random.shuffle(brokers)
        wire = KafkaWire("zkconsumer-offset-checker", socket_timeout_ms)
        try:
            metadata = wire.metadata(brokers, {t for t, _ in wanted})
            sizes = {}
            for tp in wanted:
                leader = metadata.leaders.get(tp)
                broker = metadata.brokers.get(leader) if leader is not None else None
                if broker is None:
                    continue
                try:
                    sizes[tp] = wire.offset_for(broker, tp, earliest=False)
                except (BrokerError, WireError):
                    continue
            return sizes
        finally:
            wire.close()

    return lookup
