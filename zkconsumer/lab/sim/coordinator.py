"""The coordinator design, modelled: Apache Kafka's `GroupCoordinator` state machine (classic protocol) and its
members' join/sync/heartbeat clients, on the same virtual clock and latency model (Kafka's GroupCoordinator.scala;
docs/coordinator.md).

    prediction = simulate_coordinator(CoordinatorSimConfig(members=16, churn="join", seed=1))

What is modelled, as Kafka does it (a phase completes as soon as its condition holds, never on a timer of its
own; the lab measures the same broker, Apache Kafka 3.9 in ZooKeeper mode):

* states Empty, PreparingRebalance, CompletingRebalance, Stable (Dead is never reached in one change);
* a new member's JoinGroup without an id gets MEMBER_ID_REQUIRED and a generated id, and joins again with it;
* a JoinGroup with a known id is held; the join completes when every known member has rejoined (or the rebalance
  timeout removes those that did not), then generation + 1 and every held JoinGroup is answered; the leader is
  the first member of the group and stays while it is a member;
* incumbents learn of a rebalance from their next heartbeat (REBALANCE_IN_PROGRESS), commit (an auto-commit
  consumer commits before revoking, as the lab's members do) and rejoin;
* SyncGroups wait in CompletingRebalance for the leader's, which carries the assignment (the leader runs this
  project's range assignor over the members sorted by id, as Kafka's client does); then Stable;
* LeaveGroup removes a member at once; a crashed member is removed when its session times out (no heartbeat,
  JoinGroup or SyncGroup for `session_timeout_ms`); an Empty group's first join waits
  `group.initial.rebalance.delay.ms`.

Counted per change: every request of these APIs sent from the change until the group is stable again, except
heartbeats answered NONE (periodic, they grow with time, not with changes; the lab counts them apart too), which
are in `heartbeats` with every other liveness heartbeat of the window (protocol_rules.is_heartbeat).

Also per change, from the members' ownership (what each holds between its revoke and its assignment): partitions
moved (owner at the change against owner once stable), partitions revoked from a member that got them back
(`revoked_kept`: the stop-the-world of an eager protocol), and unowned partition-seconds (the time each partition
had no owner, summed). The same model with cooperative-sticky's steps is cooperative.py; the consumer group protocol
is consumer_protocol.py; both return this module's `CoordinatorPrediction`.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from rebalance.assignment import AssignmentContext
from rebalance.assignors import RangeAssignor
from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, canonical
from zkconsumer.lab.members.naming import member_name, name_width
from zkconsumer.lab.rules.protocol import is_coordination_request, is_heartbeat
from zkconsumer.lab.sim.holdings import Holdings, split
from zkconsumer.lab.sim.latency import LatencyModel, MemberSampler, default_tables
from zkconsumer.lab.sim.scheduler import MS, S, Scheduler

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"


def kafka_latency(**kwargs: Any) -> LatencyModel:
    return LatencyModel(tables=default_tables("kafka"), fallback="Heartbeat", **kwargs)


@dataclass(frozen=True)
class CoordinatorSimConfig:
    """Defaults are the lab's herd scenario ([coordinator]: 6 s session, 2 s heartbeat, 30 s max poll)."""

    members: int = 8
    partitions: int = 72
    churn: str = "join"
    seed: int = 101
    latency: LatencyModel = field(default_factory=kafka_latency)
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 2000
    rebalance_timeout_ms: int = 30000  # max.poll.interval.ms
    initial_rebalance_delay_ms: int = 3000  # the broker's group.initial.rebalance.delay.ms (Empty groups only)
    commit_on_revoke: bool = True  # enable.auto.commit: an OffsetCommit before each rejoin and before leaving
    settle_gap_ms: int = 1000

    def __post_init__(self) -> None:
        if self.churn not in ("join", "leave", "crash"):
            raise ValueError(f"churn must be join, leave or crash, got {self.churn!r}")
        if self.members < (0 if self.churn == "join" else 1):
            raise ValueError(f"a {self.churn} needs a group with members, got {self.members}")


def design_name(name: str) -> str:
    """A broker-side design's name as designs.py spells it, checked when a model is imported (a rename there
    fails here at once, not as an empty sweep column)."""
    design = canonical(name)
    if design not in BROKER_SIDE_DESIGNS:
        raise ImportError(f"{name!r} is not a broker-side design of zkconsumer.lab.designs: {BROKER_SIDE_DESIGNS}")
    return design


EAGER = design_name("eager")


@dataclass
class CoordinatorPrediction:
    """One membership change of a broker-side design (eager: this module; cooperative.py; consumer_protocol.py)."""

    members: int
    partitions: int
    churn: str
    seed: int
    requests_by_api: dict[str, int]
    # Requests that change the group or acknowledge a change (protocol_rules.is_coordination_request): JoinGroup +
    # SyncGroup + LeaveGroup on the classic protocol, the lab's "kafka coord/chg"; on the consumer protocol the
    # ConsumerGroupHeartbeats that join, leave or report owned partitions.
    coordination: int
    settled: bool
    time_to_stable_s: float | None
    generations: int  # rounds: generations (classic protocol) or group epochs (consumer protocol) formed
    partitions_moved: int  # partitions whose owner at the change differs from their owner once stable
    wall_s: float
    design: str = EAGER
    heartbeats: int = 0  # liveness heartbeats sent from the change until stable (protocol_rules.is_heartbeat)
    noticing_s: float | None = None  # change -> the last incumbent hearing of it (docs/simulation.md)
    rebalancing_s: float | None = None  # the rest of the time to stable
    revoked: bool = False  # an incumbent revoked something (cooperative-sticky's second generation follows)
    revoked_kept: int = 0  # partitions revoked from a member that owned them again once stable
    unowned_partition_s: float = 0.0  # seconds each partition had no owner, summed over the partitions
    epoch_zero: int = 0  # ConsumerGroupHeartbeats with member epoch 0 (joins of the consumer protocol)
    # SyncGroups answered REBALANCE_IN_PROGRESS: a cooperative member that revoked rejoined before this SyncGroup
    # reached the coordinator, so its sender missed its assignment and the protocol needs one more generation.
    late_syncs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(eq=False)
class _Member:
    name: str
    sampler: MemberSampler
    member_id: str = ""
    alive: bool = True
    stable: bool = False  # holds its assignment of the current generation
    stable_at: int = 0
    heartbeat_token: int = 0


class _Model:
    """The classic protocol's coordinator and its members; the eager assignor's client steps (kafka-python)."""

    design = EAGER

    def __init__(self, config: CoordinatorSimConfig) -> None:
        self.config = config
        self.sched = Scheduler()
        self.counts: Counter[str] = Counter()
        self.counting = False
        self.state = EMPTY
        self.generation = 0
        self.leader: _Member | None = None
        self.members: dict[str, _Member] = {}  # member id -> member, in join order
        self.joined: set[str] = set()
        self.held_joins: dict[str, int] = {}  # member id -> the down half of its JoinGroup's round trip
        self.held_syncs: dict[str, int] = {}
        self.session_deadline: dict[str, int] = {}
        self.join_timer = 0  # a token: only the latest scheduled join completion counts
        self.initial_delay = False  # an Empty group's first join waits out group.initial.rebalance.delay.ms
        self.synced = 0  # members that got this generation's assignment
        self.assignment: dict[int, str] = {}  # partition -> member name, of the last stored generation
        self.by_member: dict[str, set[int]] = {}  # the stored assignment, member name -> partitions
        self.ids = itertools.count()
        self.holdings = Holdings()  # what members hold (client side)
        self.incumbents: set[str] = set()
        self.noticed: dict[str, int] = {}
        self.coordination = 0
        self.heartbeats = 0
        self.late_syncs = 0

    # --- the wire ------------------------------------------------------------------------------------

    def send(self, member: _Member, api: str, at_coordinator: Callable[[int], None], *, counted: bool = True) -> None:
        """A request: counted when sent, handled at `now + up`; the handler gets the reply's `down`."""
        if self.counting:
            if counted:
                self.counts[api] += 1
                self.coordination += is_coordination_request(api, None, None)
            self.heartbeats += is_heartbeat(api, None, None)
        up, down = member.sampler.split(api)
        self.sched.call_after(up, lambda: at_coordinator(down))

    def reply(self, down: int, fn: Callable[[], None]) -> None:
        self.sched.call_after(down, fn)

    def heard_from(self, member: _Member) -> None:
        """Kafka resets a member's session timer on every heartbeat, JoinGroup and SyncGroup."""
        deadline = self.sched.now + self.config.session_timeout_ms * MS
        self.session_deadline[member.member_id] = deadline
        self.sched.call_at(deadline, lambda: self.session_check(member, deadline))

    def session_check(self, member: _Member, deadline: int) -> None:
        if self.session_deadline.get(member.member_id) == deadline and member.member_id in self.members:
            self.remove(member)

    # --- members (client side) -----------------------------------------------------------------------

    def schedule_heartbeat(self, member: _Member, at: int) -> None:
        member.heartbeat_token += 1
        token = member.heartbeat_token
        self.sched.call_at(at, lambda: self.heartbeat(member, token))

    def heartbeat(self, member: _Member, token: int) -> None:
        if not member.alive or not member.stable or token != member.heartbeat_token:
            return
        # Counted at the coordinator, and only if the answer tells of a rebalance.
        self.send(member, "Heartbeat", lambda down: self.on_heartbeat(member, down), counted=False)
        self.schedule_heartbeat(member, self.sched.now + self.config.heartbeat_interval_ms * MS)

    def on_heartbeat(self, member: _Member, down: int) -> None:
        if member.member_id not in self.members:
            return
        self.heard_from(member)
        if self.state == PREPARING:  # REBALANCE_IN_PROGRESS: revoke (commit) and rejoin
            if self.counting:
                self.counts["Heartbeat"] += 1
            self.reply(down, lambda: self.rejoin(member))

    def rejoin(self, member: _Member) -> None:
        self.notice(member)
        if not member.alive or not member.stable:
            return
        member.stable = False
        self.prepare_join(member, lambda: self.join(member))

    def prepare_join(self, member: _Member, then: Callable[[], None]) -> None:
        """Before a rejoin: kafka-python's `_on_join_prepare` commits (auto-commit), then revokes everything."""
        self.give_up(member, None, then)

    def give_up(self, member: _Member, partitions: set[int] | None, then: Callable[[], None]) -> None:
        """Commit (auto-commit members do, before revoking), revoke `partitions` (None: all the member owns
        then), go on with `then`."""
        def revoke() -> None:
            self.revoke(member, self.holdings.owned[member.name] if partitions is None else partitions)
            then()

        if self.config.commit_on_revoke:
            self.send(member, "OffsetCommit", lambda down: self.reply(down, revoke))
        else:
            revoke()

    def notice(self, member: _Member) -> None:
        """An incumbent heard of the change (the lab's rules/noticing.py: its first REBALANCE_IN_PROGRESS answer or
        JoinGroup after the change, whichever comes first)."""
        if self.counting and member.name in self.incumbents:
            self.noticed.setdefault(member.name, self.sched.now)

    # --- what members hold ---------------------------------------------------------------------------

    def revoke(self, member: _Member, partitions: Iterable[int], *, lost: bool = False) -> None:
        self.holdings.revoke(member.name, partitions, self.sched.now, lost=lost)

    def take(self, member: _Member, partitions: Iterable[int]) -> None:
        self.holdings.take(member.name, partitions, self.sched.now)

    def assigned(self, member: _Member) -> None:
        """A SyncGroup answer: the eager member takes its whole new assignment (it revoked everything before)."""
        self.take(member, self.by_member.get(member.name, ()))

    def find_coordinator(self, member: _Member) -> None:
        """A new member: FindCoordinator, then its first JoinGroup (without a member id)."""
        self.send(member, "FindCoordinator", lambda down: self.reply(down, lambda: self.join(member)))

    def leave(self, member: _Member) -> None:
        """`KafkaConsumer.close()`: no more heartbeats; commit, then LeaveGroup."""
        member.stable = False

        self.give_up(member, None, lambda: self.send(member, "LeaveGroup", lambda _down: self.on_leave(member)))

    def crash(self, member: _Member) -> None:
        """kill -9: nothing more is sent; the coordinator notices when the session times out."""
        member.alive = False
        self.revoke(member, self.holdings.owned[member.name], lost=True)

    def join(self, member: _Member) -> None:
        self.notice(member)
        if member.alive:
            self.send(member, "JoinGroup", lambda down: self.on_join(member, down))

    def on_join_response(self, member: _Member) -> None:
        if member.alive:
            self.send(member, "SyncGroup", lambda down: self.on_sync(member, down))

    def on_sync_response(self, member: _Member) -> None:
        if not member.alive:
            return
        member.stable = True
        member.stable_at = self.sched.now
        self.synced += member.member_id in self.members
        self.schedule_heartbeat(member, self.sched.now + self.config.heartbeat_interval_ms * MS)
        self.assigned(member)

    # --- the coordinator (GroupCoordinator) ----------------------------------------------------------

    def on_join(self, member: _Member, down: int) -> None:
        if not member.member_id:  # KIP-394: a new member first learns its id
            member.member_id = f"{member.name}-{next(self.ids)}"
            self.reply(down, lambda: self.join(member))
            return
        if member.member_id not in self.members:
            self.members[member.member_id] = member
            if self.leader is None:
                self.leader = member
        self.heard_from(member)
        if self.state in (EMPTY, STABLE, COMPLETING):
            self.prepare_rebalance(initial=self.state == EMPTY)
        self.joined.add(member.member_id)
        self.held_joins[member.member_id] = down
        self.maybe_complete_join()

    def maybe_complete_join(self) -> None:
        """Kafka's `tryCompleteJoin`: every known member has rejoined (`joined` only holds members)."""
        if self.state == PREPARING and len(self.joined) == len(self.members) and not self.initial_delay:
            self.complete_join()

    def prepare_rebalance(self, initial: bool = False) -> None:
        self.state = PREPARING
        self.joined = set()
        self.held_syncs.clear()
        self.join_timer += 1
        token = self.join_timer
        delay = self.config.initial_rebalance_delay_ms if initial else self.config.rebalance_timeout_ms
        self.initial_delay = initial
        self.sched.call_after(delay * MS, lambda: self.join_timeout(token))

    def join_timeout(self, token: int) -> None:
        if token != self.join_timer or self.state != PREPARING:
            return
        for member_id in [m for m in self.members if m not in self.joined]:  # never rejoined: out
            self.members.pop(member_id)
        self.initial_delay = False
        self.complete_join()

    def complete_join(self) -> None:
        if self.leader is None or self.leader.member_id not in self.members:
            self.leader = next(iter(self.members.values()), None)
        if not self.members:
            self.state = EMPTY
            return
        self.generation += 1
        self.synced = 0
        self.state = COMPLETING
        self.join_timer += 1
        held, self.held_joins = self.held_joins, {}
        for member_id, down in held.items():
            member = self.members.get(member_id)
            if member is not None:
                self.reply(down, lambda m=member: self.on_join_response(m))

    def on_sync(self, member: _Member, down: int) -> None:
        if member.member_id not in self.members:
            return
        self.heard_from(member)
        if self.state == STABLE:
            self.reply(down, lambda: self.on_sync_response(member))
            return
        if self.state == PREPARING:
            # REBALANCE_IN_PROGRESS: a newer generation began before this SyncGroup arrived (a cooperative member
            # that revoked rejoined at once); the client rejoins at once (Kafka's `GroupCoordinator.doSyncGroup`).
            self.late_syncs += self.counting
            self.reply(down, lambda: self.prepare_join(member, lambda: self.join(member)))
            return
        if self.state != COMPLETING:
            return
        self.held_syncs[member.member_id] = down
        if member is self.leader:  # the leader's assignment is stored; everybody gets theirs
            self.store(self.assign())
            self.state = STABLE
            held, self.held_syncs = self.held_syncs, {}
            for member_id, held_down in held.items():
                waiting = self.members[member_id]
                self.reply(held_down, lambda m=waiting: self.on_sync_response(m))

    def store(self, assignment: dict[int, str]) -> None:
        self.assignment = assignment
        self.by_member = defaultdict(set)
        for p, name in assignment.items():
            self.by_member[name].add(p)

    def assign(self) -> dict[int, str]:
        """The leader's assignment, partition -> member name: eager kafka-python members use range."""
        return self.assign_range()

    def initial_assignment(self) -> dict[int, str]:
        return self.assign_range()

    def assign_range(self) -> dict[int, str]:
        """What the leader computes (the range assignor, over the members sorted by id as Kafka's client sorts
        them): partition -> member name."""
        topic = "t"
        context = AssignmentContext.build("", {m: {topic: 1} for m in self.members},
                                          {topic: range(self.config.partitions)})
        return {tp.partition: self.members[member_id].name
                for member_id, owned in RangeAssignor().assign_group(context).items() for tp in owned}

    def on_leave(self, member: _Member) -> None:
        if member.member_id in self.members:
            self.remove(member)

    def remove(self, member: _Member) -> None:
        self.members.pop(member.member_id, None)
        self.joined.discard(member.member_id)
        self.held_joins.pop(member.member_id, None)
        if self.leader is member:
            self.leader = next(iter(self.members.values()), None)
        if not self.members:  # nobody owns anything any more
            self.store({})
            self.state = EMPTY
        elif self.state in (STABLE, COMPLETING):
            self.prepare_rebalance()
        else:
            self.maybe_complete_join()

    def settled(self) -> bool:
        """Stable with every member holding this generation's assignment (a dead member not yet removed, or one
        that is leaving, keeps it unsettled), or Empty."""
        if not self.members:
            return self.state == EMPTY
        return self.state == STABLE and self.synced >= len(self.members) and all(
            m.alive and m.stable for m in self.members.values())


def simulate_coordinator(config: CoordinatorSimConfig) -> CoordinatorPrediction:
    """One change of a group of eager kafka-python members (the lab's "coordinator" design)."""
    return run_classic(_Model(config))


def run_classic(model: _Model) -> CoordinatorPrediction:
    """The settled group of `model.config.members`, one change, its counts: any classic-protocol model."""
    config = model.config
    began = time.perf_counter()
    sched = model.sched
    interval = config.heartbeat_interval_ms * MS
    width = name_width(config.members)  # the joiner's index is config.members (members/naming.py)
    for i in range(config.members):  # the settled group: generation 1, heartbeats at random phases
        name = member_name(i, width)
        member = _Member(name, config.latency.sampler(config.seed, name), member_id=f"{name}-{next(model.ids)}")
        model.members[member.member_id] = member
        member.stable = True
        phase = random.Random(f"{config.seed}:{name}#heartbeat").random()
        model.schedule_heartbeat(member, round(phase * interval))
        model.heard_from(member)
    model.leader = next(iter(model.members.values()), None)
    model.state, model.generation = (STABLE, 1) if config.members else (EMPTY, 0)
    model.store(model.initial_assignment())
    model.holdings.settle(model.by_member)
    change_at = config.settle_gap_ms * MS
    sched.run(until=change_at)
    model.counting = True
    model.holdings.start()
    generation = model.generation
    members = list(model.members.values())
    if config.churn == "join":
        model.incumbents = {m.name for m in members}
        name = member_name(config.members, width)
        joiner = _Member(name, config.latency.sampler(config.seed, name))
        sched.call_at(change_at, lambda: model.find_coordinator(joiner))
    else:
        gone = members[-1]
        model.incumbents = {m.name for m in members[:-1]}
        sched.call_at(change_at, lambda: model.leave(gone) if config.churn == "leave" else model.crash(gone))
    horizon = change_at + (config.session_timeout_ms + config.rebalance_timeout_ms) * MS * 4

    def done() -> bool:  # the change went through: a new generation is stable, or a leave/crash emptied the group
        if sched.now < change_at:
            return False
        if model.generation > generation:
            return model.synced >= len(model.members) and model.settled()
        return config.churn != "join" and not model.members and model.state == EMPTY

    sched.run(until=horizon, stop=done)
    settled = done()
    live = [m for m in model.members.values() if m.alive]
    finished = max((m.stable_at for m in live), default=sched.now)
    outcome = model.holdings.outcome((m.name for m in live), finished)
    times = split(change_at, finished if settled else None, model.noticed.values())
    return CoordinatorPrediction(
        members=config.members, partitions=config.partitions, churn=config.churn, seed=config.seed,
        requests_by_api=dict(sorted(model.counts.items())), coordination=model.coordination,
        settled=settled, time_to_stable_s=(finished - change_at) / S if settled else None,
        generations=model.generation - generation, partitions_moved=outcome.partitions_moved,
        wall_s=round(time.perf_counter() - began, 3), design=model.design, heartbeats=model.heartbeats,
        noticing_s=times.noticing_s, rebalancing_s=times.rebalancing_s,
        revoked=bool(outcome.revoked_members & model.incumbents), revoked_kept=outcome.revoked_kept,
        unowned_partition_s=outcome.unowned_partition_s, late_syncs=model.late_syncs)
