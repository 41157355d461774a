"""Log end offsets ("logSize") for group inspection, from each partition's leader (ListOffsets latest, as
0.8's `ConsumerOffsetChecker` asks)."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable

from fetcher_manager.broker import Broker
from fetcher_manager.kafka_wire import BrokerError, KafkaWire, WireError
from zkconsumer.groups import LogEndLookup
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_brokers

log = logging.getLogger(__name__)


def leader_log_ends(brokers: list[Broker], partitions: Iterable[tuple[str, int]], *, client_id: str,
                    socket_timeout_ms: int) -> dict[tuple[str, int], int]:
    """Each partition's log end offset from its leader, asking the brokers for metadata in random order. A
    partition whose leader is unknown or fails is left out; raises `WireError`/`BrokerError` when no broker
    gives metadata."""
    wanted = list(partitions)
    shuffled = list(brokers)
    random.shuffle(shuffled)
    wire = KafkaWire(client_id, socket_timeout_ms)
    try:
        metadata = wire.metadata(shuffled, {t for t, _ in wanted})
        ends = {}
        for tp in wanted:
            leader = metadata.leaders.get(tp)
            broker = metadata.brokers.get(leader) if leader is not None else None
            if broker is None:
                continue
            try:
                ends[tp] = wire.offset_for(broker, tp, earliest=False)
            except (BrokerError, WireError) as exc:
                log.debug("log end of %s unavailable: %s", tp, exc)
        return ends
    finally:
        wire.close()


def log_end_lookup(zk: ZkClient, socket_timeout_ms: int = 5000) -> LogEndLookup:
    def lookup(partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return leader_log_ends(read_brokers(zk, skip_bad=True), partitions, client_id="zkconsumer-offset-checker",
                               socket_timeout_ms=socket_timeout_ms)

    return lookup
