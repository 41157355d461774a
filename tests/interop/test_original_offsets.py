"""Offsets across implementations: what one commits the other resumes from (both ways), `auto.offset.reset` on
both, and a kill -9 of an original member whose partitions this project's member takes over at the offsets the
original committed (the messages it consumed after that commit are delivered again: at-least-once).
"""

from __future__ import annotations

import pytest
from helpers import unique, wait_for
from interop_support import Drain, first_offsets, group_nodes, offsets_seen, produce

from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.interop
WAIT_S = 60.0


def covered(messages, topic: str, end: dict[int, int]) -> bool:
    """Every partition of `end` delivered up to offset end[p] - 1."""
    seen = offsets_seen(messages, topic)
    return all(max(seen.get(p, [-1])) >= last - 1 for p, last in end.items())


def stored(zk, group: str, topic: str, partitions) -> dict[int, bytes | None]:
    return {p: zk.get(layout.offset_path(group, topic, p)) for p in partitions}


def test_offsets_committed_by_the_original_are_resumed_by_ours(cluster, members, originals, zk):
    topic = cluster.create_topic(partitions=3)
    group = unique("off-o2p")
    produce(cluster.bootstrap_servers, topic, range(3), 20)
    original = originals(group, "c1", topics={topic: 1})
    wait_for(lambda: covered(original.messages, topic, dict.fromkeys(range(3), 20)), WAIT_S, message="20 each")
    assert original.commit() == {(topic, p): 20 for p in range(3)}
    assert stored(zk, group, topic, range(3)) == dict.fromkeys(range(3), b"20")
    original.stop()

    produce(cluster.bootstrap_servers, topic, range(3), 10, start=20)
    connector = members(group, "c2", consumer_timeout_ms=200)
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c2")
    try:
        wait_for(lambda: covered(drain.consumed, topic, dict.fromkeys(range(3), 30)), WAIT_S, message="30 each")
        assert first_offsets(drain.consumed, topic) == dict.fromkeys(range(3), 20)
        assert connector.commit_offsets() == 3
        assert stored(zk, group, topic, range(3)) == dict.fromkeys(range(3), b"30")
    finally:
        drain.stop()


@pytest.mark.slow
def test_offsets_committed_by_ours_are_resumed_by_the_original(cluster, members, originals, zk):
    topic = cluster.create_topic(partitions=3)
    group = unique("off-p2o")
    produce(cluster.bootstrap_servers, topic, range(3), 20)
    connector = members(group, "c1", consumer_timeout_ms=200)
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c1")
    try:
        wait_for(lambda: covered(drain.consumed, topic, dict.fromkeys(range(3), 20)), WAIT_S, message="20 each")
        assert connector.commit_offsets() == 3
    finally:
        drain.stop()
    connector.shutdown()
    assert stored(zk, group, topic, range(3)) == dict.fromkeys(range(3), b"20")

    produce(cluster.bootstrap_servers, topic, range(3), 10, start=20)
    original = originals(group, "c2", topics={topic: 1})
    wait_for(lambda: covered(original.messages, topic, dict.fromkeys(range(3), 30)), WAIT_S, message="30 each")
    assert first_offsets(original.messages, topic) == dict.fromkeys(range(3), 20)
    assert original.commit() == {(topic, p): 30 for p in range(3)}


@pytest.mark.slow
@pytest.mark.parametrize("reset", ["smallest", "largest"])
def test_auto_offset_reset_alike(cluster, members, originals, zk, reset):
    """A group with no stored offsets starts at the log start or end on both; once both consumed everything and
    committed, the two groups' offset znodes (and every other persistent znode) are the same."""
    topic = cluster.create_topic(partitions=2)
    before = 15
    produce(cluster.bootstrap_servers, topic, range(2), before)
    theirs, ours = unique(f"reset-o-{reset}"), unique(f"reset-p-{reset}")
    original = originals(theirs, "c1", topics={topic: 1}, auto_offset_reset=reset)
    connector = members(ours, "c1", auto_offset_reset=reset, consumer_timeout_ms=200)
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c1")
    try:
        end = before
        if reset == "largest":
            # The reset happens when the fetcher first adds a partition, some time after the rebalance: produce
            # until both have received something on every partition, then check nothing older came through.
            def both_receiving() -> bool:
                nonlocal end
                produce(cluster.bootstrap_servers, topic, range(2), 5, start=end)
                end += 5
                return all(len(offsets_seen(m, topic)) == 2 for m in (original.messages, drain.consumed))

            wait_for(both_receiving, WAIT_S, interval=0.5, message="messages produced after the reset")
        for read in (lambda: original.messages, lambda: drain.consumed):
            wait_for(lambda r=read: covered(r(), topic, dict.fromkeys(range(2), end)), WAIT_S,
                     message=f"offsets up to {end}")
            firsts = first_offsets(read(), topic)
            if reset == "smallest":
                assert firsts == {0: 0, 1: 0}
            else:
                assert min(firsts.values()) >= before, firsts
        assert original.commit() == {(topic, p): end for p in range(2)}
        assert connector.commit_offsets() == 2
    finally:
        drain.stop()
    assert stored(zk, theirs, topic, range(2)) == stored(zk, ours, topic, range(2)) == dict.fromkeys(
        range(2), str(end).encode())
    assert group_nodes(zk, theirs)[0] == group_nodes(zk, ours)[0]  # persistent: ids, owners, offsets dirs and values


@pytest.mark.slow
def test_kill_9_of_an_original_member_ours_takes_over_at_its_committed_offsets(cluster, members, originals, zk):
    topic = cluster.create_topic(partitions=4)
    group = unique("kill9")
    produce(cluster.bootstrap_servers, topic, range(4), 10)
    original = originals(group, "c1", topics={topic: 1})
    connector = members(group, "c2", consumer_timeout_ms=200)
    drain = Drain(connector.create_message_streams({topic: 1})[topic], "c2")
    try:
        # Range: c1-0 sorts first and owns partitions 0 and 1; ours (c2-0) owns 2 and 3.
        wait_for(lambda: zk.owners(group) == {(topic, 0): f"{group}_c1-0", (topic, 1): f"{group}_c1-0",
                                              (topic, 2): f"{group}_c2-0", (topic, 3): f"{group}_c2-0"},
                 WAIT_S, message="the range split")
        wait_for(lambda: covered(original.messages, topic, {0: 10, 1: 10}), WAIT_S, message="10 each")
        assert original.commit() == {(topic, 0): 10, (topic, 1): 10}
        produce(cluster.bootstrap_servers, topic, range(4), 5, start=10)
        wait_for(lambda: covered(original.messages, topic, {0: 15, 1: 15}), WAIT_S, message="15 each")
        assert not offsets_seen(drain.consumed, topic).keys() & {0, 1}

        original.kill()
        # No shutdown ran: its session, registration and owner nodes live on until the session times out.
        assert zk.exists(layout.registration_path(group, f"{group}_c1"))
        wait_for(lambda: zk.owners(group) == {(topic, p): f"{group}_c2-0" for p in range(4)}, WAIT_S,
                 message="ours to own every partition")
        wait_for(lambda: covered(drain.consumed, topic, {0: 15, 1: 15}), WAIT_S, message="the taken-over partitions")
        taken = {p: offs for p, offs in offsets_seen(drain.consumed, topic).items() if p in (0, 1)}
        assert taken == {0: list(range(10, 15)), 1: list(range(10, 15))}  # 10..14 again: consumed, not committed
    finally:
        drain.stop()
