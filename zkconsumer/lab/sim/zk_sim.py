"""The ZooKeeper design, simulated: N real members settle, one membership change, counted until the group is
stable again (docs/simulation.md).

    prediction = simulate_zk(ZkSimConfig(members=16, partitions=72, churn="join", seed=1))

1. **The settled group** is built without virtual time (`instant`): every member registers first, then each
   runs `create_message_streams`, so all of them list the complete group and the start costs no herd. Its
   requests are not counted.
2. **The change** (at `settle_gap` later): `join` (a new member's `create_message_streams`, and its two chroot
   checks if `chroot`), `leave` (the newest member's `shutdown()`), or `crash` (the newest member stops; the server
   expires its session `session_timeout_ms` later).
3. **Counting**: requests and notifications are the server's per-session counters of every member (the same
   counts the lab's proxy sees on the wire) between the change and the end; the run ends when no event is left.
   Time to stable: from the change to the last member's transition to `owning`, if the group converged.

**Not modelled: connection losses.** A simulated member's connection never drops while its session lives (the
virtual server answers every request it is sent), so a prediction never holds the requests a real member sends again
after kazoo dropped its connection and resumed the session (the herd's starved connection threads on a busy host).
A real run's re-sent requests (zkconsumer/lab/rules/reconnects.py) are in its observed count; the lab summary and the
analysis show them beside it, and the predictions' notes say this.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from rebalance import opt_in, sticky_agreement
from rebalance.assignment import TopicPartition
from rebalance.assignors import get_assignor
from rebalance.convergence import check_convergence
from rebalance.events import MemberEvent, MemberState
from rebalance.subscription import Registration
from zkconsumer.lab.members.naming import member_name
from zkconsumer.lab.rules.join_cost import accounted_requests
from zkconsumer.lab.rules.protocol import is_conflict, is_failed_attempt
from zkconsumer.lab.sim.capacity import Resources
from zkconsumer.lab.sim.host import collector_paused, long_lived_heap
from zkconsumer.lab.sim.latency import WIRE_OP
from zkconsumer.lab.sim.scheduler import MS, S, Scheduler, SimulationError
from zkconsumer.lab.sim.views import ViewCache
from zkconsumer.lab.sim.zk_config import ZkSimConfig
from zkconsumer.lab.sim.zk_env import SimServer, instant_client
from zkconsumer.lab.sim.zk_members import ACCOUNTED, SimMember
from zkconsumer.registration import register
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.group import read_group_snapshot

_BROKER = b'{"version":1,"host":"127.0.0.1","port":9092,"jmx_port":-1}'


@dataclass
class ZkPrediction:
    members: int
    partitions: int
    churn: str
    seed: int
    requests: int  # ZooKeeper requests of the change (what the lab's proxy counts)
    requests_by_op: dict[str, int]
    notifications: int
    accounted_requests: int  # zkconsumer.lab.rules.join_cost.accounted_requests over the members' events
    settled: bool
    time_to_stable_s: float | None
    rebalances: int
    attempts: int
    failed_attempts: int
    conflicts: int
    failures: int  # rebalances that exhausted their retries
    partitions_moved: int  # partitions whose owner (thread) differs after the change
    batches: int  # attempts whose registration reads the shortcut counted as one batch
    counted_reads: int
    executed_reads: int
    events: int  # scheduler events of the change
    wall_s: float
    # With a capacity: seconds of service during the change of the busiest server, the busiest host, the proxy
    # and all cores together (capacity.Resources.busy_s); empty without one.
    busy_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ZkWorld:
    """The scheduler, the server and the members of one simulation, and what the change costs them."""

    def __init__(self, config: ZkSimConfig) -> None:
        self.config = config
        self.sched = Scheduler()
        self.server = SimServer(self.sched, config.group)
        self.views = ViewCache(config.group, exclude_internal_topics=True)
        self.resources = None if config.capacity is None else Resources(config.capacity,
                                                                         config.members + config.joiners)
        self.instant = False
        self.recording = False
        self.members: list[SimMember] = []
        self.tally: Counter[str] = Counter()
        self.accounted: list[dict[str, Any]] = []
        self.owners_before: Mapping[TopicPartition, str] = {}

    def record(self, member: SimMember, event: MemberEvent) -> None:
        if not self.recording:
            return
        kind = str(event.kind)
        if kind in ACCOUNTED:
            self.accounted.append({"kind": kind, "ok": event.data.get("ok")})
        if kind == "attempt_end":
            self.tally["attempts"] += 1
            result = event.data.get("result")
            self.tally["failed_attempts"] += is_failed_attempt(result)
            self.tally["conflicts"] += is_conflict(result)
        elif kind in ("rebalance_begin", "rebalance_failed"):
            self.tally[kind] += 1


@contextmanager
def _quiet() -> Iterator[None]:
    """Thousands of members log every claim; only a critical message is worth the time here."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(previous)


def simulate_zk(config: ZkSimConfig) -> ZkPrediction:
    began = time.perf_counter()
    world = ZkWorld(config)
    try:
        with _quiet():
            return _simulate(world, began)
    finally:
        world.sched.terminate_all()


def _simulate(world: ZkWorld, began: float) -> ZkPrediction:
    config, server = world.config, world.server
    admin = instant_client(server, "admin")
    for broker in range(1, config.brokers + 1):
        admin.create(layout.broker_path(broker), _BROKER, ephemeral=True)
    admin.create(layout.topic_path(config.topic), codecs.encode_topic({p: [1] for p in range(config.partitions)}))
    streams = {config.topic: config.streams}
    with collector_paused():
        _start_settled_group(world, streams)
    if not _converged(world, admin, world.members):
        raise SimulationError("the settled group did not converge before the change")
    world.owners_before = read_group_snapshot(admin, config.group).owners

    with long_lived_heap():
        return _change(world, admin, streams, began)


def _change(world: ZkWorld, admin: Any, streams: dict[str, int], began: float) -> ZkPrediction:
    config, sched, server = world.config, world.sched, world.server
    world.instant = False
    for member in world.members:
        member.client.instant = False
    before = _totals(server, admin)
    events_before = sched.events
    world.recording = True
    change_at = sched.now + config.settle_gap_ms * MS
    live = list(world.members)
    if config.churn == "join":
        for k in range(config.joiners):
            joiner = SimMember(world, member_name(config.members + k, config.name_width), config.members + k,
                               chroot_checks=config.chroot)
            live.append(joiner)
            joiner.spawn("caller", functools.partial(joiner.join, streams), at=change_at + k * config.join_gap_ms * MS)
    else:
        gone = live.pop()
        if config.churn == "leave":
            gone.spawn("caller", gone.leave, at=change_at)
        else:
            sched.call_at(change_at, gone.crash)
            sched.call_at(change_at + config.session_timeout_ms * MS,
                          lambda: server.expire_session(gone.client.session_id))  # type: ignore[arg-type]
    sched.run(until=change_at + round(config.horizon_s * S))
    events = sched.events - events_before
    world.recording = False
    spent = _totals(server, admin) - before
    settled = sched.idle and _converged(world, admin, live)
    owners = read_group_snapshot(admin, config.group).owners
    moved = sum(owners.get(tp) != owner for tp, owner in world.owners_before.items()) + sum(
        tp not in world.owners_before for tp in owners)
    finished = [m.owning_at for m in live if m.owning_at is not None and m.owning_at >= change_at]
    time_to_stable = None if not settled else (max(finished) - change_at) / S if finished else 0.0
    requests = {WIRE_OP[k]: v for k, v in sorted(spent.items()) if ":" not in k and v}
    notifications = sum(v for k, v in spent.items() if k.startswith("watch:"))
    size = len(live)
    joiners = config.joiners if config.churn == "join" else 0
    # Exact for one change; with several joiners an attempt may have seen fewer members than `size`.
    accounted = accounted_requests(world.accounted, members_seen=size, joiners=joiners, notified=notifications,
                                   brokers=config.brokers, chroot=config.chroot and joiners > 0)
    accounted += requests.get("closeSession", 0)  # the leaver's session close, outside any rebalance
    stats = world.views.stats
    return ZkPrediction(
        members=config.members, partitions=config.partitions, churn=config.churn, seed=config.seed,
        requests=sum(requests.values()), requests_by_op=requests, notifications=notifications,
        accounted_requests=accounted, settled=settled, time_to_stable_s=time_to_stable,
        rebalances=world.tally["rebalance_begin"], attempts=world.tally["attempts"],
        failed_attempts=world.tally["failed_attempts"], conflicts=world.tally["conflicts"],
        failures=world.tally["rebalance_failed"], partitions_moved=moved, batches=stats.batches,
        counted_reads=stats.counted_reads, executed_reads=stats.executed_reads, events=events,
        wall_s=round(time.perf_counter() - began, 3),
        busy_s={} if world.resources is None else {k: round(v, 6) for k, v in world.resources.busy_s().items()})


def _start_settled_group(world: ZkWorld, streams: dict[str, int]) -> None:
    """Every member registers (the public `register`, on its own session) before any member starts its streams,
    so each first rebalance sees the whole group and no notification goes out. `create_message_streams` then
    finds its node, rewrites it, watches and rebalances, as a member restarted into its own live session does."""
    config, sched = world.config, world.sched
    world.instant = True
    registration = Registration.static(streams)

    def start_all() -> None:
        for i in range(config.members):
            member = SimMember(world, member_name(i, config.name_width), i)
            world.members.append(member)
            member.build()
            register(member.client, config.group, member.consumer_id, _with_modes(registration, member), 0.0)
        for member in world.members:
            assert member.connector is not None
            member.connector.create_message_streams(streams)

    sched.spawn("settled-group", start_all)
    sched.run()
    for stat in ("batches", "counted_reads", "executed_reads"):
        setattr(world.views.stats, stat, 0)


def _with_modes(registration: Registration, member: SimMember) -> Registration:
    """The registration as the member's connector writes it: the modes that need every member named in it (the
    barrier, the sticky assignor), so the first rebalance of each sees a group that runs them."""
    modes = ((opt_in.BARRIER,) if member.listener.settings.modes.barrier else ()) + (
        (sticky_agreement.STICKY,) if member.listener.assignor.uses_previous else ())
    return dataclasses.replace(registration, modes=modes) if modes else registration


def _totals(server: SimServer, admin: Any) -> Counter[str]:
    return Counter(server.op_counts()) - Counter(server.op_counts(admin.session_id))


def _converged(world: ZkWorld, admin: Any, live: list[SimMember]) -> bool:
    """The lab's `stable()`: registrations are the live members, owners are what the strategy prescribes for
    them, and every live member's last state is `owning`."""
    snapshot = read_group_snapshot(admin, world.config.group)
    if set(snapshot.registrations) != {m.consumer_id for m in live}:
        return False
    if not live:
        return True
    if not check_convergence(snapshot, get_assignor(world.config.assignment_strategy)).settled:
        return False
    return all(m.listener.state == MemberState.OWNING for m in live)
