"""A kafka-python lab member (coordinator_member.CoordinatorMember, here as threads of this process) asked to stop
at a random moment of its poll closes its consumer and leaves the group promptly, and sends nothing to the group
coordinator after its LeaveGroup.

Each cycle starts two members, lets them settle, starts a third, and stops all three at once (as a run ends:
CoordinatorDriver.stop) at a moment drawn from a seeded generator: in even cycles somewhere in the settled group's
polls (fetch waits, heartbeats, auto-commits), in odd cycles somewhere in the rebalance the joiner started, from
the first heartbeat that tells an incumbent to rejoin (its poll then revokes, commits and sends its JoinGroup; the
joiner waits in its own). Every link to the broker
is delayed a little (through the Kafka proxy), which widens the moments a stop can fall into.

A stop that closed the consumer from another thread while the poll thread was still inside `poll()` let the
poll's join loop answer the LeaveGroup with a fresh JoinGroup/SyncGroup (kafka-python's
BaseCoordinator.join_group_async): a member id that never leaves, which the coordinator waits for, a session
timeout, before the rest of the group can settle. The checks below catch that: a group request after the
member's LeaveGroup, and a stop that takes longer than a session timeout.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest
from helpers import unique, wait_for
from kafka.admin import KafkaAdminClient, NewTopic

from zkconsumer.lab.coordinator_member import CoordinatorMember, CoordinatorMemberSettings
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.lab.wire import KafkaProxy

PARTITIONS = 6
CYCLES = 20  # three stops each
SEED = 20261129
HEARTBEAT_MS = 500
SESSION_MS = 6000
LINK_DELAY_MS, LINK_JITTER_MS = 30.0, 20.0
# Less than a session timeout: a stop that waits that long waited for a member id its own member left behind.
STOP_BOUND_S = 5.0
REBALANCE_IN_PROGRESS = 27  # Kafka's Errors.REBALANCE_IN_PROGRESS
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup")


def thread_stacks(prefixes: tuple[str, ...]) -> str:
    frames = sys._current_frames()
    return "\n".join(f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
                     for t in threading.enumerate()
                     if t.ident in frames and t.name.startswith(prefixes))


def group_requests(proxy: KafkaProxy, member: str) -> list[tuple[float, str]]:
    return [(r.ts, r.api_name) for r in proxy.sink.records()
            if r.kind == "request" and r.client_id == member and r.api_name in GROUP_APIS]


def told_to_rejoin(proxy: KafkaProxy, members: list[CoordinatorMember], since: float) -> bool:
    """A heartbeat of one of `members` was answered REBALANCE_IN_PROGRESS (Kafka's error 27) after `since` (wall
    time): its poll rejoins within a fetch wait (kafka-python's BaseCoordinator._handle_heartbeat_response only
    sets rejoin_needed)."""
    names = {m.name for m in members}
    return any(r.kind == "response" and r.api_name == "Heartbeat" and r.error_code == REBALANCE_IN_PROGRESS
               and r.client_id in names and r.ts > since for r in proxy.sink.records())


def settled(members: list[CoordinatorMember]) -> bool:
    return (all(m.partitions for m in members) and len({m.generation for m in members}) == 1
            and sum(len(m.partitions) for m in members) == PARTITIONS)


def check_stopped(member: CoordinatorMember, run: RunDirectory, proxy: KafkaProxy, what: str) -> None:
    assert member.error is None, f"{what}: {member.name} failed: {member.error!r}"
    closed = [r for r in read_traces(run.path)
              if r["type"] == "member_event" and r["kind"] == "closed" and r["member"] == member.name]
    assert len(closed) == 1, f"{what}: {member.name} wrote {len(closed)} closed records"
    # kafka-python sends LeaveGroup only for a member with an id that is not UNJOINED
    # (BaseCoordinator.maybe_leave_group_async): every member here has joined, or is joining, when it stops.
    assert closed[0]["member_id"] and closed[0]["group_state"] != "<unjoined>", (what, closed[0])
    requests = group_requests(proxy, member.name)
    leaves = [ts for ts, api in requests if api == "LeaveGroup"]
    assert len(leaves) == 1, f"{what}: {member.name} sent {len(leaves)} LeaveGroup requests"
    late = [api for ts, api in requests if ts > leaves[0]]
    assert not late, f"{what}: {member.name} sent {late} after its LeaveGroup"


def stop_cycle(cycle: int, draw: random.Random, topic: str, tmp_path: Path, proxy: KafkaProxy) -> float:
    """Two members settle, a third starts, all three are stopped at a drawn moment; returns the stop's duration."""
    run = RunDirectory.create(tmp_path / f"cycle{cycle}")
    group = unique("group")
    members = []
    for name in (f"s{cycle}a", f"s{cycle}b", f"s{cycle}c"):
        proxy.delay(name, LINK_DELAY_MS, LINK_JITTER_MS)
        settings = CoordinatorMemberSettings(
            name=name, group=group, topics=[topic], bootstrap=proxy.bootstrap, run_path=str(run.path),
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS, auto_commit_interval_ms=500)
        members.append(CoordinatorMember(settings, run.trace(name, "coordinator")))
    incumbents, joiner = members[:2], members[2]
    try:
        for member in incumbents:
            member.start()
        wait_for(lambda: settled(incumbents), timeout=30, message=f"cycle {cycle}: two members settled")
        joined_at = time.time()  # the proxy's records carry wall times
        joiner.start()
        if cycle % 2:
            wait_for(lambda: told_to_rejoin(proxy, incumbents, joined_at), timeout=30,
                     message=f"cycle {cycle}: an incumbent told to rejoin")
            span = HEARTBEAT_MS / 1000  # the other incumbent hears it within a heartbeat; both rejoin in it
        else:
            wait_for(lambda: settled(members), timeout=30, message=f"cycle {cycle}: three members settled")
            span = 2 * HEARTBEAT_MS / 1000
        # The stop's moment (what is drawn, not a wait for anything): wherever the polls happen to be.
        time.sleep(draw.uniform(0, span))
        began = time.monotonic()
        for member in members:
            member.request_stop()
        for member in members:
            if not member.join(max(0.0, STOP_BOUND_S - (time.monotonic() - began))):
                pytest.fail(f"cycle {cycle}: {member.name} still running {STOP_BOUND_S:.0f} s after the stop\n"
                            + thread_stacks((f"lab-{member.name}-", f"kafka-io-{member.name}")))
        took = time.monotonic() - began
        for member in members:
            check_stopped(member, run, proxy, f"cycle {cycle}")
        return took
    finally:
        for member in members:
            member.stop(timeout=60)
            member.trace.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_members_stopped_at_random_moments_of_their_poll_close_and_leave(tmp_path: Path, proxy: KafkaProxy,
                                                                         proxied_kafka) -> None:
    topic = unique("midpoll")
    admin = KafkaAdminClient(bootstrap_servers=proxied_kafka.direct, client_id="admin")
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    draw = random.Random(SEED)
    took = [stop_cycle(cycle, draw, topic, tmp_path, proxy) for cycle in range(CYCLES)]
    print(f"{3 * len(took)} stops in {len(took)} cycles; slowest stop {max(took):.2f} s")
