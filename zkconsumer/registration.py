"""Consumer ids and the registration node `/consumers/<g>/ids/<id>`."""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
import uuid

from fetcher_manager.fetcher_id import java_string_hashcode
from rebalance.subscription import Registration
from rebalance.sync import Event
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import NodeExistsError, ZkClient, ZkClosedError

log = logging.getLogger(__name__)


class ConsumerRegistrationError(RuntimeError):
    """Our id is held by another live session: two members were given the same consumer.id."""


class RegistrationInterruptedError(RuntimeError):
    """The member shut down while it was waiting for an old registration node to go away."""


def make_consumer_id(group_id: str, consumer_id: str | None = None) -> str:
    """`<group>_<consumer.id>`, else `<group>_<host>-<epochMs>-<8 hex>` as the Scala connector builds it.

    The 8 hex characters are the start of Java's `Long.toHexString(uuid.getMostSignificantBits())`:
    unpadded, with negative values in two's complement, which is the unsigned hex of the top 64 bits.
    """
    if consumer_id:
        return f"{group_id}_{consumer_id}"
    suffix = format(uuid.uuid4().int >> 64, "x")[:8]
    return f"{group_id}_{socket.gethostname()}-{int(time.time() * 1000)}-{suffix}"


def _scala_hash_trie_key(topic: str) -> tuple[int, ...]:
    """Where Scala 2.11's `immutable.HashMap` puts a String key: `improve(key.hashCode)`, whose 5-bit chunks from
    the low end index the trie's levels; iteration visits slots in ascending order, level by level."""
    h = java_string_hashcode(topic) & 0xFFFFFFFF
    h = (h + (~(h << 9) & 0xFFFFFFFF)) & 0xFFFFFFFF
    h ^= h >> 14
    h = (h + (h << 4)) & 0xFFFFFFFF
    h ^= h >> 10
    return tuple((h >> shift) & 31 for shift in range(0, 32, 5))


def as_stored_by_0_8_2(registration: Registration) -> Registration:
    """The subscription in the order a 0.8.2.2 member writes it. Its createMessageStreams copies the topic map into
    a Scala `immutable.Map` (javaapi's `Map.empty ++ topicCountMap`) and `Json.encode` iterates that: up to four
    entries keep the caller's order (Map1..Map4), five or more become a hash trie. Readers ignore the order; this
    makes our bytes equal to theirs (tests/interop/test_original_groups.py). Keys with equal hashes keep the
    caller's order, as the trie's collision nodes do."""
    if len(registration.subscription) <= 4:
        return registration
    ordered = dict(sorted(registration.subscription.items(), key=lambda item: _scala_hash_trie_key(item[0])))
    return dataclasses.replace(registration, subscription=ordered)


def register(zk: ZkClient, group: str, consumer_id: str, registration: Registration, wait_s: float,
             stop: Event | None = None) -> None:
    """Create our ephemeral registration, waiting for a previous session's node to go away.

    0.8.2 loops until the old node disappears (ZOOKEEPER-1740 workaround): a member restarted with the same
    consumer.id before its old session expired waits for that expiry instead of failing (other ZooKeeper-balanced
    clients, e.g. kafka-node, fail with NODE_EXISTS on a quick restart). We bound the wait, because a node that
    outlives it belongs to a *live* duplicate, and we accept a node already owned by our own session (KAFKA-1387).
    The wait ends at once when `stop` is set (the member is shutting down): `RegistrationInterruptedError`.
    """
    stop = stop or threading.Event()
    try:
        _register(zk, layout.registration_path(group, consumer_id), consumer_id, registration, wait_s, stop)
    except ZkClosedError:
        if stop.is_set():  # the shutdown closed the client under us: report it as the interruption it is
            raise RegistrationInterruptedError(f"{consumer_id}: shut down while waiting to register") from None
        raise


def _register(zk: ZkClient, path: str, consumer_id: str, registration: Registration, wait_s: float,
              stop: Event) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        if stop.is_set():
            raise RegistrationInterruptedError(f"{consumer_id}: shut down while waiting to register")
        data = codecs.encode_registration(as_stored_by_0_8_2(registration))
        try:
            zk.create(path, data, ephemeral=True)
            log.info("%s: registered %s", consumer_id, data.decode())
            return
        except NodeExistsError:
            owner = zk.ephemeral_owner(path)
            if owner == zk.session_id:
                zk.set(path, data)  # our own node from before a connection loss: refresh the content
                return
            if owner is None:
                continue  # vanished between create and read: try again at once
            if time.monotonic() > deadline:
                raise ConsumerRegistrationError(
                    f"{consumer_id} is still registered by another live session (0x{owner:x}) after {wait_s:.0f} s: "
                    "consumer.id must be unique within the group"
                ) from None
            log.info("%s: registration node exists from session 0x%x; waiting for it to expire", consumer_id, owner)
            if stop.wait(min(0.5, max(0.05, deadline - time.monotonic()))):
                raise RegistrationInterruptedError(f"{consumer_id}: shut down while waiting to register") from None
