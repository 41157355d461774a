"""Log end offsets for the watch view, from each partition's leader (as `zkconsumer/logsize.py` does for
`groups describe`), with short timeouts: a view must not stall on a broker that is down."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from fetcher_manager.broker import Broker
from fetcher_manager.kafka_wire import BrokerError, WireError
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.errors import InputError
from zkconsumer.logsize import leader_log_ends
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import read_brokers

log = logging.getLogger(__name__)
LAG_SOCKET_TIMEOUT_MS = 2000


def parse_bootstrap(bootstrap: str) -> list[Broker]:
    """`host:port,host:port` as brokers with unknown ids (-1): only used to ask for metadata."""
    brokers = []
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"--bootstrap entry {entry.strip()!r} is not HOST:PORT")
        brokers.append(Broker(-1, host.strip("[]"), int(port)))
    return brokers


def brokers_to_ask(zk: ZkClient, bootstrap: list[Broker] | None) -> list[Broker]:
    """--bootstrap if given, else the brokers registered in /brokers/ids (plain reads, no watch)."""
    if bootstrap:
        return list(bootstrap)
    return read_brokers(zk, skip_bad=True)


def log_end_offsets(brokers: list[Broker], partitions: Iterable[TopicPartition],
                    timeout_ms: int = LAG_SOCKET_TIMEOUT_MS) -> dict[TopicPartition, int] | None:
    """Log end offset per partition; None if no broker answered. A partition whose leader is unknown or fails is
    left out (shown as "-")."""
    if not brokers:
        return None
    try:
        ends = leader_log_ends(brokers, partitions, client_id="zkconsumer-watch", socket_timeout_ms=timeout_ms)
    except (WireError, BrokerError) as exc:
        log.info("log end offsets unavailable: %s", exc)
        return None
    return {TopicPartition(*tp): end for tp, end in ends.items()}
