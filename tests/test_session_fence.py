"""A member writes nothing decided under a ZooKeeper session that has expired (docs/chaos.md, invariant 4):
the offsets it owned then are fenced until its new session is set up, and a write that failed with the old session
is not resent under the new one. 0.8.2 could do both, and a member woken from a pause longer than its session then
moved a partition's offset back below its new owner's commit."""

from __future__ import annotations

import threading

import pytest
from helpers import unique, wait_for

from rebalance.offsets import OffsetCheckpoints
from zkconsumer.lab.wire.links import BLACKHOLE
from zkconsumer.lab.wire.zk import ZkProxy
from zkconsumer.zookeeper.client import ZkClient, ZkSessionChangedError
from zkconsumer.zookeeper.expiry import expire_session
from zkconsumer.zookeeper.group import ZkGroupStore
from zkconsumer.zookeeper.memory import MemoryZkClient, MemoryZooKeeper


class Info:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.consumed_offset = topic, partition, offset


def test_fenced_offsets_are_not_written_until_the_new_session_is_set_up() -> None:
    zk = MemoryZkClient(MemoryZooKeeper(), log_id="fence-unit").start()
    store = ZkGroupStore(zk, "g")
    offsets = OffsetCheckpoints(store, "g_m")
    assert offsets.commit([Info("t", 0, 10)]) == 1
    offsets.fence()  # the session that claimed t/0 expired
    assert offsets.commit([Info("t", 0, 7), Info("t", 1, 3)]) == 0
    assert store.read_offset("t", 0) == 10 and store.read_offset("t", 1) == -1
    offsets.reset()  # the new session's state: what it owns now may be committed again
    assert offsets.commit([Info("t", 1, 3)]) == 1
    assert store.read_offset("t", 1) == 3


@pytest.mark.slow
@pytest.mark.parametrize("noticed_first", [False, True], ids=["sent-then-lost", "asked-while-disconnected"])
def test_a_write_of_an_expired_session_is_not_sent_under_the_new_one(zk_connect: str, noticed_first: bool) -> None:
    """sent-then-lost: the write goes out into a blackhole and its session dies meanwhile; it must not be resent.
    asked-while-disconnected: the write is asked for once the client knows it is cut off, so it waits for the
    connection; the session that decided it expires meanwhile: it must not go out in the next one either. (Found by
    the campaign: a member woken from a pause asked for an auto-commit before its client noticed the expiry; the write
    waited for the reconnect and landed under the new session, 62 after its new owner's 133.)"""
    server, _, chroot = zk_connect.partition("/")
    path = f"/{unique('offset')}"
    with ZkProxy(server, name=unique("fence")) as proxy:
        port = proxy.add_link("member")
        client = ZkClient(f"127.0.0.1:{port}/{chroot}", session_timeout_ms=2000, request_timeout_s=30,
                          log_id="fence-test").start()
        direct = ZkClient(zk_connect, log_id="fence-observer").start()
        try:
            client.set(path, b"10")
            session_id, password = client.session_credentials
            proxy.cut("member", BLACKHOLE)
            outcome: list[BaseException | None] = []
            writer = threading.Thread(target=lambda: outcome.append(_attempt(client, path, b"7")),
                                      name="fence-writer", daemon=True)
            if noticed_first:
                wait_for(lambda: not client.connected, message="the client never noticed the blackhole")
                writer.start()  # it waits for the connection: nothing is sent yet
            else:
                writer.start()  # the write goes nowhere
                wait_for(lambda: not client.connected, message="the client never noticed the blackhole")
            expire_session(server, session_id, password)
            proxy.restore("member")
            writer.join(40)
            assert not writer.is_alive()
            assert isinstance(outcome[0], ZkSessionChangedError), outcome
            assert client.session_id != session_id  # it did get a new session
            assert direct.get(path)[0] == b"10"  # and the write decided under the old one never landed
        finally:
            client.close()
            direct.close()


def _attempt(client: ZkClient, path: str, data: bytes) -> BaseException | None:
    try:
        client.set(path, data)
    except BaseException as exc:  # the outcome is the assertion
        return exc
    return None

