"""A kafka-python lab member asked to stop always closes its consumer and leaves the group (one LeaveGroup, and no
group request after it), however the request meets it: mid-poll while it consumes, or mid-rebalance while its poll
waits for a join; and a stop signal never deadlocks the member process's main thread (member_process.StopRequest).

Two ways to stop, on one topic of the session's proxied broker (`stop_topic`), each cycle a group of its own:

- Member processes (CoordinatorDriver, as a lab run ends): the signal reaches the member's main thread, which closes
  and exits 0. A few cycles, half of them settled, half mid-rebalance: the close itself at many moments is the
  thread test's subject, and the signal-handler deadlock is pinned by the child-process test below.
- Members as threads of this process (coordinator_member.CoordinatorMember), stopped at a random moment of their
  poll. Each cycle starts two members, lets them settle, starts a third, and stops all three at once at a moment
  drawn from a seeded generator: in even cycles somewhere in the settled group's polls (fetch waits, heartbeats,
  auto-commits), in odd cycles somewhere in the rebalance the joiner started, from the first heartbeat that tells
  an incumbent to rejoin (its poll then revokes, commits and sends its JoinGroup; the joiner waits in its own).
  Every link to the broker is delayed a little (through the Kafka proxy), which widens the moments a stop can fall
  into.

A stop that closed the consumer from another thread while the poll thread was still inside `poll()` let the
poll's join loop answer the LeaveGroup with a fresh JoinGroup/SyncGroup (kafka-python's
BaseCoordinator.join_group_async): a member id that never leaves, which the coordinator waits for, a session
timeout, before the rest of the group can settle. The checks catch that: a group request after the member's
LeaveGroup, and a stop that takes longer than a session timeout.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from pathlib import Path

import pytest
from helpers import unique, wait_for

from zkconsumer.lab.drivers.coordinator import CoordinatorDriver
from zkconsumer.lab.drivers.interface import LabEnvironment
from zkconsumer.lab.members.coordinator import CoordinatorMember, CoordinatorMemberSettings
from zkconsumer.lab.scenarios.loading import expand_cases, parse_scenario
from zkconsumer.lab.trace import RunDirectory, read_traces
from zkconsumer.lab.wire import KafkaProxy

PARTITIONS = 6
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup")


@pytest.fixture(scope="module")
def stop_topic(proxied_kafka, new_topic) -> str:
    """One topic for every cycle of both tests (each cycle's group is its own)."""
    return new_topic(proxied_kafka.direct, "stop", PARTITIONS)


def group_requests(proxy: KafkaProxy, member: str) -> list[tuple[float, str]]:
    return [(r.ts, r.api_name) for r in proxy.sink.records()
            if r.kind == "request" and r.client_id == member and r.api_name in GROUP_APIS]


def assert_left_once_and_went_quiet(proxy: KafkaProxy, member: str, what: str) -> None:
    """One LeaveGroup, and no group request after it."""
    requests = group_requests(proxy, member)
    leaves = [ts for ts, api in requests if api == "LeaveGroup"]
    assert len(leaves) == 1, f"{what}: {member} sent {len(leaves)} LeaveGroup requests"
    late = [api for ts, api in requests if ts > leaves[0]]
    assert not late, f"{what}: {member} sent {late} after its LeaveGroup"


# --- member processes -------------------------------------------------------------------------------------------

CYCLES = 8
STOP_BOUND_S = 15.0  # well inside the driver's kill (settle bound + close budget + 10 s)

SCENARIO = """
name = "member-stop"
description = "members started and stopped, over and over"
designs = ["coordinator"]
duration = 1.0
[group]
members = 3
topics = [{{ name = "{topic}", partitions = {partitions} }}]
[coordinator]
session_timeout_ms = 6000
heartbeat_interval_ms = 500
"""


def requests(proxy: KafkaProxy, member: str, api: str) -> int:
    return proxy.counters(member).get("requests", {}).get(api, 0)


def stable_with(driver: CoordinatorDriver, names: list[str]) -> bool:
    return driver.live_members() == sorted(names) and driver.assignment() is not None


def stop_cycle(cycle: int, run: RunDirectory, env: LabEnvironment, proxy: KafkaProxy) -> float:
    """Three members, stopped together (as a run ends: CoordinatorDriver.stop) mid-poll; returns the stop's time."""
    driver = CoordinatorDriver("processes")
    driver.start(env)
    names = [f"c{cycle}a", f"c{cycle}b", f"c{cycle}c"]
    try:
        for name in names[:2]:
            driver.join(name)
        wait_for(lambda: stable_with(driver, names[:2]), timeout=30, message=f"cycle {cycle}: two stable")
        driver.join(names[2])
        if cycle % 2:
            # Mid-rebalance: the joiner has its member id and waits in its second JoinGroup (KIP-394), the
            # incumbents are rejoining; every poll is inside a join.
            wait_for(lambda: requests(proxy, names[2], "JoinGroup") >= 2, timeout=30,
                     message=f"cycle {cycle}: the joiner's second JoinGroup")
        else:
            # Mid-poll while stable: every member's long poll is fetching.
            wait_for(lambda: stable_with(driver, names), timeout=30, message=f"cycle {cycle}: three stable")
    finally:
        stopped_at = time.monotonic()
        driver.stop()
    took = time.monotonic() - stopped_at
    assert driver.stats()["exit_codes"] == {name: [0] for name in names}, f"cycle {cycle}"
    closed = {r["member"]: r for r in read_traces(run.path) if r["type"] == "member_event" and r["kind"] == "closed"}
    assert sorted(closed) == names, f"cycle {cycle}: closed {sorted(closed)}"
    for name, record in closed.items():
        # a member with an id and not unjoined: kafka-python's close sends LeaveGroup, and the proxy saw it
        assert record["member_id"] and record["group_state"] != "<unjoined>", (cycle, record)
        assert requests(proxy, name, "LeaveGroup") == 1, f"cycle {cycle}: {name}"
        assert_left_once_and_went_quiet(proxy, name, f"cycle {cycle}")
    return took


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_members_stopped_mid_poll_always_close_and_leave(tmp_path: Path, proxy: KafkaProxy, stop_topic) -> None:
    topic = stop_topic
    [case] = expand_cases(parse_scenario(SCENARIO.format(topic=topic, partitions=PARTITIONS), "inline"))
    began = time.monotonic()
    for cycle in range(CYCLES):
        run = RunDirectory.create(tmp_path / f"cycle{cycle}")
        env = LabEnvironment(run=run, case=case, group=unique("group"), topics={topic: PARTITIONS},
                             zookeeper_connect=lambda _name: "unused", bootstrap=proxy.bootstrap,
                             direct_zookeeper="unused", trace=run.trace("run", "coordinator"))
        took = stop_cycle(cycle, run, env, proxy)
        assert took < STOP_BOUND_S, f"cycle {cycle}: the stop took {took:.1f} s"
    assert time.monotonic() - began < 360


# --- members as threads, stopped at drawn moments ----------------------------------------------------------

THREAD_CYCLES = 20  # three stops each
SEED = 20261129
HEARTBEAT_MS = 500
SESSION_MS = 6000
LINK_DELAY_MS, LINK_JITTER_MS = 30.0, 20.0
# Less than a session timeout: a stop that waits that long waited for a member id its own member left behind.
THREAD_STOP_BOUND_S = 5.0
REBALANCE_IN_PROGRESS = 27  # Kafka's Errors.REBALANCE_IN_PROGRESS


def thread_stacks(prefixes: tuple[str, ...]) -> str:
    frames = sys._current_frames()
    return "\n".join(f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
                     for t in threading.enumerate()
                     if t.ident in frames and t.name.startswith(prefixes))


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
    assert_left_once_and_went_quiet(proxy, member.name, what)


def thread_stop_cycle(cycle: int, draw: random.Random, topic: str, tmp_path: Path, proxy: KafkaProxy) -> float:
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
            if not member.join(max(0.0, THREAD_STOP_BOUND_S - (time.monotonic() - began))):
                pytest.fail(f"cycle {cycle}: {member.name} still running {THREAD_STOP_BOUND_S:.0f} s after the stop\n"
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
                                                                         stop_topic) -> None:
    draw = random.Random(SEED)
    took = [thread_stop_cycle(cycle, draw, stop_topic, tmp_path, proxy) for cycle in range(THREAD_CYCLES)]
    print(f"{3 * len(took)} stops in {len(took)} cycles; slowest stop {max(took):.2f} s")


# --- the stop signal ---------------------------------------------------------------------------------------------

CHILD = """
import os, signal, sys
from zkconsumer.lab.members.process import StopRequest

def step():
    return 1

stopping = StopRequest()
stopping.install()
# The main thread inside Event.wait() on the request, or inside a first SIGTERM's handler when a second one lands:
# the event's lock is held when Python runs the next handler, at the next function call.
with stopping._event._cond:
    os.kill(os.getpid(), signal.SIGTERM)
    step()
sys.exit(0 if stopping.wait(1.0) else 3)
"""


@pytest.mark.slow  # a child Python
def test_a_stop_signal_while_the_main_thread_holds_the_stop_lock_does_not_deadlock() -> None:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()  # by its pid: a handler that waits for the lock its own thread holds never returns
        proc.communicate()
        pytest.fail("the member's SIGTERM handler deadlocked on the stop request's lock")
    assert proc.returncode == 0, output.decode(errors="replace")
