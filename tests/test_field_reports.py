"""Field reports that other tests did not yet cover, against the suite's real ZooKeeper and Kafka broker.

Each test names the reported symptom (docs/field-reports.md lists every report and where it is shown) and asserts
what this design does about it. The figures docs/field-reports.md quotes are printed (run with -s) and never
asserted: they are measurements, the assertions are the behaviour.
"""

from __future__ import annotations

import threading
import time

import pytest
from helpers import EventRecorder, make_config, unique, wait_for
from kafka import KafkaProducer
from test_connector import converged, start_member_process

from rebalance.events import EventKind, MemberState
from rebalance.subscription import Registration
from zkconsumer import ConsumerRebalanceFailedError, ZookeeperConsumerConnector
from zkconsumer.lab.wire import BLACKHOLE, RecordCollector, ZkProxy
from zkconsumer.registration import ConsumerRegistrationError, register
from zkconsumer.zookeeper import layout
from zkconsumer.zookeeper.client import ZkClient

pytestmark = pytest.mark.slow


def test_two_topics_in_one_group_are_balanced_by_subscription(cluster, zk, members):
    """A group whose members read different topics: each topic is shared only among its subscribers (0.8.2's
    range assignor takes `consumersForTopic`), so a member of another topic takes nothing away from it."""
    clicks, views = cluster.create_topic(partitions=4), cluster.create_topic(partitions=4)
    group = unique("g")
    a, b, c = members(group, "a"), members(group, "b"), members(group, "c")
    a.create_message_streams({clicks: 1})
    b.create_message_streams({views: 2})
    c.create_message_streams({clicks: 1})
    expected = {(clicks, 0): f"{group}_a-0", (clicks, 1): f"{group}_a-0", (clicks, 2): f"{group}_c-0",
                (clicks, 3): f"{group}_c-0", (views, 0): f"{group}_b-0", (views, 1): f"{group}_b-0",
                (views, 2): f"{group}_b-1", (views, 3): f"{group}_b-1"}
    wait_for(lambda: zk.owners(group) == expected, message="each topic split among its own subscribers")
    wait_for(lambda: converged(zk, group, {clicks: 4, views: 4}), message="every member's view settled")
    assert sum(m.rebalance_stats.failures for m in (a, b, c)) == 0
    print(f"\nrow 20: 3 members, 2 topics x 4 partitions: {len(expected) - len(zk.owners(group))} unowned of 8")


def test_members_beyond_the_partition_count_stay_idle_without_errors(cluster, zk, members):
    """More consumers than partitions (pykafka's test_extra_consumer): the extra members own nothing, fail nothing,
    and one of them takes over when an owner leaves."""
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    started = [members(group, f"m{i}") for i in range(4)]
    for member in started:
        member.create_message_streams({topic: 1})
    expected = {(topic, 0): f"{group}_m0-0", (topic, 1): f"{group}_m1-0"}
    wait_for(lambda: zk.owners(group) == expected, message="the first two ids own one partition each")
    wait_for(lambda: [len(m.owned_partitions()) for m in started] == [1, 1, 0, 0], message="idle members own none")
    assert sum(m.rebalance_stats.failures for m in started) == 0
    started[0].shutdown()
    wait_for(lambda: zk.owners(group) == {(topic, 0): f"{group}_m1-0", (topic, 1): f"{group}_m2-0"},
             message="an idle member takes over when an owner leaves")
    print(f"\npykafka extra consumer: 4 members, 2 partitions: {len(zk.owners(group))} owned, 2 idle, "
          f"{sum(m.rebalance_stats.failures for m in started)} failed rebalances")


def test_a_failed_attempt_leaves_no_partial_claim_behind(cluster, zk, members):
    """kafka-node's partition owned in ZooKeeper but consumed by nobody: here an attempt that meets a taken node
    deletes the claims it made before giving up, so only the foreign owner node is left, and the partitions go
    to the group once that node is gone."""
    topic = cluster.create_topic(partitions=3)
    group = unique("g")
    zk.create(f"/consumers/{group}/owners/{topic}/2", b"somebody-else-0", ephemeral=True)
    member = members(group, "m", rebalance_max_retries=2, rebalance_backoff_ms=50)
    events = EventRecorder()
    member.add_event_listener(events)
    with pytest.raises(ConsumerRebalanceFailedError):
        member.create_message_streams({topic: 1})
    made = [e.data["partition"] for e in events.of(EventKind.CLAIM) if e.data["ok"]]
    rolled_back = [e.data["partition"] for e in events.of(EventKind.ROLLBACK)]
    assert made and sorted(made) == sorted(rolled_back)  # every claim that succeeded was deleted again
    assert zk.owners(group) == {(topic, 2): "somebody-else-0"} and member.owned_partitions() == {}
    zk.delete(f"/consumers/{group}/owners/{topic}/2")
    members(group, "n").create_message_streams({topic: 1})  # a join triggers everybody
    wait_for(lambda: converged(zk, group, {topic: 3}), message="all three owned once the foreign node is gone")
    print(f"\nrow 5: 2 failed attempts made {len(made)} claims and rolled back {len(rolled_back)}: "
          f"0 left behind; then {len(zk.owners(group))} of 3 owned")


def test_a_registration_node_of_our_own_session_is_taken_over(cluster, zk):
    """KAFKA-1387: a member that finds its registration node already there from its *own* session (a create
    retried after a lost reply) must not wait for it to expire: it refreshes the content and goes on; a node of
    another live session is a duplicate consumer.id and fails within the wait, it does not loop forever."""
    group = unique("g")
    path = layout.registration_path(group, f"{group}_m")
    own = ZkClient(cluster.zookeeper_connect, session_timeout_ms=4000, log_id="own").start()
    other = ZkClient(cluster.zookeeper_connect, session_timeout_ms=4000, log_id="other").start()
    try:
        own.ensure_path(layout.ids_dir(group))
        own.create(path, b"left over", ephemeral=True)
        register(own, group, f"{group}_m", Registration.static({"t": 1}), wait_s=0.0)
        assert zk.text(path).startswith('{"version":1,"subscription":{"t":1}')
        assert zk.stat(path).ephemeralOwner == own.session_id
        with pytest.raises(ConsumerRegistrationError, match="another live session"):
            register(other, group, f"{group}_m", Registration.static({"t": 1}), wait_s=0.5)
        assert zk.stat(path).ephemeralOwner == own.session_id
    finally:
        other.close()
        own.close()


def test_a_fast_bounce_with_a_rebalance_budget_below_the_session_timeout(cluster, zk, members):
    """The restart trap with 0.8's default retries (4) and a backoff whose budget (4 x 0.3 s) is far below the
    4 s session timeout: the restarted member waits to register until the old session is gone, so no attempt
    of it ever meets an owner node of its own former self, and no rebalance of the group fails."""
    topic = cluster.create_topic(partitions=4)
    group = unique("g")
    budget = {"rebalance_max_retries": 4, "rebalance_backoff_ms": 300}
    proc = start_member_process(cluster.zookeeper_connect, group, "fixed", topic)
    try:
        peer = members(group, "peer", **budget)
        peer.create_message_streams({topic: 1})
        wait_for(lambda: converged(zk, group, {topic: 4}) and len(set(zk.owners(group).values())) == 2, timeout=60,
                 message="the process and the peer share the topic")
        old_session = zk.stat(f"/consumers/{group}/ids/{group}_fixed").ephemeralOwner
        proc.kill()
        proc.wait(timeout=10)
        killed = time.monotonic()
        bounced = members(group, "fixed", **budget)
        events = EventRecorder()
        bounced.add_event_listener(events)
        bounced.create_message_streams({topic: 1})  # returns once registered and rebalanced
        waited = time.monotonic() - killed
        assert zk.stat(f"/consumers/{group}/ids/{group}_fixed").ephemeralOwner == bounced.zk.session_id != old_session
        wait_for(lambda: converged(zk, group, {topic: 4}) and set(zk.owners(group).values())
                 == {f"{group}_fixed-0", f"{group}_peer-0"}, message="the bounced member owns its share again")
        taken = [e.data.get("owner") for e in events.of(EventKind.CLAIM) if not e.data["ok"]]
        assert f"{group}_fixed-0" not in taken  # never blocked by its own old owner nodes
        assert bounced.rebalance_stats.failures == 0 and peer.rebalance_stats.failures == 0
        print(f"\nrows 1/27: budget 1.2 s < session 4 s; the bounce waited {waited:.1f} s from the kill to own; "
              f"{len(taken)} claims met a peer's node; 0 failed rebalances")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_consumer_blocked_on_an_idle_topic_does_not_hold_up_a_rebalance(cluster, zk, members):
    """pykafka's blocking consume() held the rebalance lock, so a second consumer failed with PartitionOwnedError:
    here rebalances run on the member's watcher thread, not on the application's, and a blocked iterator ends
    on shutdown."""
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    first = members(group, "a")
    [stream] = first.create_message_streams({topic: 1})[topic]
    received: list = []
    reader = threading.Thread(target=lambda: received.extend(stream), name="test-blocked-reader", daemon=True)
    reader.start()
    second = members(group, "b", rebalance_max_retries=4, rebalance_backoff_ms=300)
    second.create_message_streams({topic: 1})
    wait_for(lambda: converged(zk, group, {topic: 2}) and len(set(zk.owners(group).values())) == 2,
             message="the joiner gets its partition while the first member's reader is blocked")
    assert reader.is_alive() and received == []
    assert first.rebalance_stats.failures == 0 and second.rebalance_stats.failures == 0
    first.shutdown()
    reader.join(10)
    assert not reader.is_alive(), "the blocked iterator must end when its connector shuts down"
    print(f"\nrow 13: a reader blocked on an idle topic; the joiner owns {len(second.owned_partitions())} of 2, "
          "0 failed rebalances")


def test_sixteen_joins_within_half_a_second_on_46_partitions_all_converge(cluster, zk, members):
    """kafka-node's 16 processes on 46 partitions, started together. The joins are spread 25 ms apart, so each
    lands while the members before it are rebalancing: they compute from different views and their claims may
    race (a conflict costs an attempt and a backoff). With a budget of 20 retries the group converges with every
    partition owned once and no member gives up; the conflicts are the herd's cost, printed, not asserted."""
    topic = cluster.create_topic(partitions=46)
    group = unique("g")
    started = [members(group, f"c{i:02d}", rebalance_max_retries=20, rebalance_backoff_ms=300) for i in range(16)]
    gate = threading.Barrier(16)

    def join(index: int, member) -> None:
        gate.wait()
        time.sleep(index * 0.025)  # the schedule of the joins, not a synchronisation
        member.create_message_streams({topic: 1})

    threads = [threading.Thread(target=join, args=(i, m), name=f"test-join-{i}") for i, m in enumerate(started)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    wait_for(lambda: converged(zk, group, {topic: 46}), timeout=60, message="16 members converge on 46 partitions")
    owned_s = time.monotonic() - began
    assert sorted(len(m.owned_partitions()) for m in started) == [2] * 2 + [3] * 14
    assert sum(m.rebalance_stats.failures for m in started) == 0
    stats = [m.rebalance_stats for m in started]
    print(f"\nrows 2-4, 23: 16 joins 25 ms apart, 46 partitions: all owned after {owned_s:.1f} s; "
          f"{sum(s.rebalances for s in stats)} rebalances, {sum(s.attempts for s in stats)} attempts, "
          f"{sum(s.conflicts for s in stats)} conflicts, max {max(s.attempts for s in stats)} attempts by one "
          "member, 0 failed")


def _read_into(stream, into: list, name: str) -> threading.Thread:
    """A reader appending (partition, offset) of every message the stream hands out, until its connector ends."""
    thread = threading.Thread(target=lambda: into.extend((m.partition, m.offset) for m in stream), name=name,
                              daemon=True)
    thread.start()
    return thread


def test_a_member_cut_off_from_zookeeper_reads_on_while_the_group_gives_its_partition_away(cluster, zk, zk_server,
                                                                                          members):
    """Two consumers read the same partition while one of them cannot reach ZooKeeper but can reach Kafka: the
    server expires its session and the group hands its partition to another member, but the cut-off member hears
    of the expiry only when it reconnects, and fetches on until then. Inherent in ZooKeeper-based ownership (the
    session is the only lease, and only the server sees it end); once the link is back the member stops fetching
    at once, re-registers and the group converges again."""
    topic = cluster.create_topic(partitions=2)
    group = unique("g")
    with ZkProxy(zk_server.connect_string, sink=RecordCollector(), name=unique("zkp")) as proxy:
        proxy.add_link("a")
        cut_off = ZookeeperConsumerConnector(make_config(proxy.connect_string("a"), group, "a"))
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
        try:
            events = EventRecorder()
            cut_off.add_event_listener(events)
            read_by_a: list[tuple[int, int]] = []
            read_by_b: list[tuple[int, int]] = []
            _read_into(cut_off.create_message_streams({topic: 1})[topic][0], read_by_a, "test-reader-a")
            other = members(group, "b")
            _read_into(other.create_message_streams({topic: 1})[topic][0], read_by_b, "test-reader-b")
            # Owner nodes alone can show the split while a rebalance of a is still going (the cut would then
            # stop it halfway, fetching nothing): wait for both members' own view too.
            # Owning is not yet fetching: a's leader finder lists the brokers from ZooKeeper before it hands the
            # partition to a fetcher thread, so a cut before that leaves a with nothing to read on with.
            wait_for(lambda: zk.owners(group) == {(topic, 0): f"{group}_a-0", (topic, 1): f"{group}_b-0"}
                     and cut_off.state == MemberState.OWNING and set(cut_off.owned_partitions()) == {(topic, 0)}
                     and other.state == MemberState.OWNING and set(other.owned_partitions()) == {(topic, 1)}
                     and set(cut_off.fetcher_manager.fetching()) == {(topic, 0)},
                     message="a owns partition 0, b partition 1, both have settled and a's fetcher holds 0")
            proxy.cut("a", BLACKHOLE)
            cut = time.monotonic()
            wait_for(lambda: zk.owners(group) == {(topic, 0): f"{group}_b-0", (topic, 1): f"{group}_b-0"},
                     timeout=30, message="a's session expired on the server: b owns both")
            given_away = time.monotonic()
            print(f"\nrow 12: partition 0 given to b {given_away - cut:.1f} s after the cut (session 4 s)")
            sent = [producer.send(topic, value=b"after the expiry", partition=0) for _ in range(20)]
            producer.flush()
            offsets = {(0, f.get(timeout=30).offset) for f in sent}
            try:
                wait_for(lambda: offsets <= set(read_by_b), message="the new owner reads the new messages")
                wait_for(lambda: offsets <= set(read_by_a), message="the cut-off member reads them too")
            except AssertionError as exc:  # say where each reader is, and what the cut-off member last did
                raise AssertionError(f"{exc}; produced {sorted(offsets)[:3]}..; b's last reads {read_by_b[-3:]}, "
                                     f"a's {read_by_a[-3:]}; a's last events "
                                     f"{[(str(e.kind), e.data) for e in events.events[-6:]]}") from exc
            assert not events.of(EventKind.SESSION_EXPIRED)  # it does not know yet: nothing told it
            window = time.monotonic() - given_away
            proxy.restore("a")
            wait_for(lambda: events.of(EventKind.SESSION_EXPIRED), timeout=30, message="a hears of the expiry")
            wait_for(lambda: zk.owners(group) == {(topic, 0): f"{group}_a-0", (topic, 1): f"{group}_b-0"},
                     timeout=30, message="a re-registered and the group converged again")
            print(f"row 12: {len(offsets)} of {len(offsets)} messages produced after that were read by both members; "
                  f"a read on for {window:.1f} s after the give-away without knowing, until the link came back")
        finally:
            producer.close()
            cut_off.shutdown()
