"""The consumer design, modelled: Kafka 4's consumer group protocol (KIP-848) and librdkafka members with
`group.protocol=consumer`, on the virtual clock and latency tables of coordinator.py (docs/simulation.md, "The
newer protocols").

    prediction = simulate_consumer_protocol(CoordinatorSimConfig(members=16, churn="join", seed=1))

There is no JoinGroup or SyncGroup: every request is a ConsumerGroupHeartbeat, and the broker assigns. What is
modelled, after Kafka 4's group-coordinator module (`GroupMetadataManager.consumerGroupHeartbeat`, its
`CurrentAssignmentBuilder` and the uniform assignor's `UniformHomogeneousAssignmentBuilder`) and librdkafka's
src/rdkafka_cgrp.c:

* a join (member epoch 0), a leave (epoch -1) or a session timeout bumps the group epoch once, and the broker
  computes the new target at once (sticky.py: balanced within one partition, sticky);
* each member learns its new target in the answer to its next heartbeat (every `heartbeat_interval_ms`, the
  broker's `group.consumer.heartbeat.interval.ms`, at a phase of its own). A member that must give partitions up is
  told its smaller assignment, revokes them at once and acknowledges (a heartbeat with `owned`, sent at once);
  only then does it move to the new epoch, and only then are the partitions free;
* a member gets a partition in the answer to a heartbeat that reaches the broker once the partition is free, and
  acknowledges it at once: the joiner's assignment arrives in steps, each bounded by one interval;
* a member that loses and gains nothing moves to the new epoch in the answer to its next heartbeat (the answer
  carries no assignment: nothing changed);
* after any heartbeat it sends, a member's next one is one interval later.

Stable: every member of the group at the group epoch, owning exactly its target, as Kafka's `ConsumerGroup` calls a
group Stable. Counted per change, from the change until stable: every request (FindCoordinator, OffsetCommit, each
ConsumerGroupHeartbeat), coordination and heartbeats split by protocol_rules (a join, a leave, an
acknowledgement carrying `owned` is coordination; the rest are liveness heartbeats, N + 1 per interval).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from zkconsumer.lab.members.naming import member_name, name_width
from zkconsumer.lab.rules.protocol import GROUP_HEARTBEAT_API, is_coordination_request, is_heartbeat
from zkconsumer.lab.sim.coordinator import CoordinatorPrediction, CoordinatorSimConfig, design_name
from zkconsumer.lab.sim.holdings import Holdings, split
from zkconsumer.lab.sim.latency import MemberSampler
from zkconsumer.lab.sim.scheduler import MS, S, Scheduler
from zkconsumer.lab.sim.sticky import sticky_assignment

CONSUMER = design_name("consumer")
JOIN_EPOCH, LEAVE_EPOCH = 0, -1  # KIP-848's member epochs of a join and a leave (docs/wire.md)


@dataclass(eq=False)
class _Member:
    name: str
    sampler: MemberSampler
    alive: bool = True
    closing: bool = False
    epoch: int = 0  # the member's epoch, as the broker last answered it
    told: frozenset[int] = frozenset()  # the assignment the broker last gave it
    acking: bool = False  # an acknowledgement (a heartbeat with `owned`) is not answered yet
    heartbeat_token: int = 0
    stable_at: int = 0


@dataclass(eq=False)
class _Broker:
    """The coordinator's view of one member: its epoch and the partitions it still holds (given it and not yet
    reported released)."""

    epoch: int
    held: set[int] = field(default_factory=set)
    session_token: int = 0


class _Model:
    def __init__(self, config: CoordinatorSimConfig) -> None:
        self.config = config
        self.sched = Scheduler()
        self.interval = config.heartbeat_interval_ms * MS
        self.counts: Counter[str] = Counter()
        self.counting = False
        self.coordination = self.heartbeats = self.epoch_zero = 0
        self.group_epoch = 0
        self.epochs_formed = 0
        self.group: dict[str, _Broker] = {}  # member name -> the broker's view, in join order
        self.members: dict[str, _Member] = {}
        self.target: dict[str, set[int]] = {}
        self.holdings = Holdings()
        self.incumbents: set[str] = set()
        self.noticed: dict[str, int] = {}
        # Members not yet reconciled, kept as they change: checking all N after every event would make a change
        # of 10,000 members quadratic.
        self.unsettled: set[str] = set()

    # --- the wire ------------------------------------------------------------------------------------

    def send(self, member: _Member, api: str, at_broker: Callable[[int], None], *, epoch: int | None = None,
             owned: frozenset[int] | None = None) -> None:
        if self.counting:
            self.counts[api] += 1
            self.coordination += is_coordination_request(api, epoch, None if owned is None else len(owned))
            self.heartbeats += is_heartbeat(api, epoch, None if owned is None else len(owned))
            self.epoch_zero += api == GROUP_HEARTBEAT_API and epoch == JOIN_EPOCH
        # ConsumerGroupHeartbeat is drawn from the classic Heartbeat's table in the packaged tables (they hold no
        # KIP-848 round trips yet: kafka_latency's fallback), both being answered at once by the coordinator;
        # tables fitted from consumer-protocol runs hold its own (zkconsumer/lab/analysis/calibration.py)
        up, down = member.sampler.split(api)
        self.sched.call_after(up, lambda: at_broker(down))

    # --- members (librdkafka) ------------------------------------------------------------------------

    def heartbeat(self, member: _Member, owned: frozenset[int] | None = None, epoch: int | None = None) -> None:
        """Send one ConsumerGroupHeartbeat now (`owned`: an acknowledgement) and the next one an interval later."""
        if not member.alive:
            return
        epoch = member.epoch if epoch is None else epoch
        member.acking = member.acking or owned is not None
        self.send(member, GROUP_HEARTBEAT_API, lambda down: self.on_heartbeat(member, epoch, owned, down),
                  epoch=epoch, owned=owned)
        member.heartbeat_token += 1
        token = member.heartbeat_token
        self.sched.call_after(self.interval, lambda: token == member.heartbeat_token and self.heartbeat(member))

    def on_answer(self, member: _Member, epoch: int, assignment: frozenset[int] | None, acked: bool) -> None:
        if not member.alive or member.closing:
            return
        if acked:
            member.acking = False
        if member.name in self.incumbents and (assignment is not None or epoch != member.epoch):
            self.noticed.setdefault(member.name, self.sched.now)
        member.epoch = epoch
        if assignment is None:
            member.stable_at = self.sched.now
            self.check(member.name)
            return
        member.told = assignment
        owned = self.holdings.owned[member.name]
        lost, gained = owned - assignment, assignment - owned
        self.holdings.take(member.name, gained, self.sched.now)
        if lost:
            self.holdings.revoke(member.name, lost, self.sched.now)
        if lost or gained:
            # Reconciled: acknowledge at once (librdkafka expedites the heartbeat that reports `owned`); an
            # auto-commit member commits what it gives up first.
            ack = frozenset(self.holdings.owned[member.name])
            if lost and self.config.commit_on_revoke:
                self.send(member, "OffsetCommit",
                          lambda down: self.sched.call_after(down, lambda: self.heartbeat(member, ack)))
            else:
                self.heartbeat(member, ack)
        else:
            member.stable_at = self.sched.now
        self.check(member.name)

    def check(self, name: str) -> None:
        state, member = self.group.get(name), self.members[name]
        if state is None or (state.epoch == self.group_epoch == member.epoch and not member.acking
                             and self.holdings.owned[name] == self.target[name] == state.held):
            self.unsettled.discard(name)
        else:
            self.unsettled.add(name)

    def join(self, member: _Member) -> None:
        def joined(down: int) -> None:
            self.sched.call_after(down, lambda: self.heartbeat(member, frozenset(), JOIN_EPOCH))

        self.send(member, "FindCoordinator", joined)

    def leave(self, member: _Member) -> None:
        """close(): revoke everything (committing first), then a heartbeat with epoch -1."""
        member.closing = True
        member.heartbeat_token += 1

        def leave_group() -> None:
            self.holdings.revoke(member.name, set(self.holdings.owned[member.name]), self.sched.now)
            self.send(member, GROUP_HEARTBEAT_API, lambda _down: self.remove(member.name), epoch=LEAVE_EPOCH)

        if self.config.commit_on_revoke:
            self.send(member, "OffsetCommit", lambda down: self.sched.call_after(down, leave_group))
        else:
            leave_group()

    def crash(self, member: _Member) -> None:
        member.alive = False
        self.holdings.revoke(member.name, set(self.holdings.owned[member.name]), self.sched.now, lost=True)

    # --- the broker (GroupMetadataManager.consumerGroupHeartbeat) ------------------------------------

    def bump(self) -> None:
        """A member joined or left: the next group epoch and its target, computed at once."""
        self.group_epoch += 1
        self.epochs_formed += self.counting
        names = list(self.group)
        self.target = sticky_assignment(self.config.partitions, names, self.target)
        self.unsettled = set(names)

    def heard_from(self, name: str) -> None:
        state = self.group.get(name)
        if state is None:
            return
        state.session_token += 1
        token = state.session_token
        self.sched.call_after(self.config.session_timeout_ms * MS,
                              lambda: state.session_token == token and self.remove(name))

    def remove(self, name: str) -> None:
        if self.group.pop(name, None) is not None:
            self.target.pop(name, None)
            self.bump()

    def on_heartbeat(self, member: _Member, epoch: int, owned: frozenset[int] | None, down: int) -> None:
        if epoch == JOIN_EPOCH:
            self.group[member.name] = _Broker(epoch=0)
            self.bump()
        state = self.group.get(member.name)
        if state is None:
            return
        self.heard_from(member.name)
        if owned is not None:  # what the member reports holding: the rest is free
            state.held &= owned
        target = self.target[member.name]
        if state.epoch < self.group_epoch and not state.held - target:
            state.epoch = self.group_epoch
        if state.epoch < self.group_epoch:  # UNREVOKED_PARTITIONS: give up the rest first, at the old epoch
            assignment = frozenset(state.held & target)
        else:  # at the group epoch: whatever of its target nobody else holds any more is its own
            missing = target - state.held
            if missing:
                others = {p for name, other in self.group.items() if name != member.name for p in other.held}
                state.held |= missing - others
            assignment = frozenset(state.held)
        changed = assignment != member.told or epoch == JOIN_EPOCH
        answer_epoch, acked = state.epoch, owned is not None
        self.sched.call_after(down, lambda: self.on_answer(member, answer_epoch, assignment if changed else None,
                                                           acked))
        self.check(member.name)

    def settled(self) -> bool:
        """Every member at the group epoch on both sides (the broker's answer has arrived), owning its target,
        its acknowledgements answered."""
        return not self.unsettled


def simulate_consumer_protocol(config: CoordinatorSimConfig) -> CoordinatorPrediction:
    """One change of a group of librdkafka members on the consumer group protocol. `heartbeat_interval_ms` and
    `session_timeout_ms` are the broker's `group.consumer.*` settings; the rebalance timeout and the initial
    rebalance delay have no part in this protocol."""
    began = time.perf_counter()
    model = _Model(config)
    sched = model.sched
    width = name_width(config.members)
    for i in range(config.members):  # the settled group: epoch 1, reconciled, heartbeats at random phases
        name = member_name(i, width)
        member = _Member(name, config.latency.sampler(config.seed, name), epoch=1)
        model.members[name] = member
        model.group[name] = _Broker(epoch=1)
    model.group_epoch = 1 if config.members else 0
    model.target = sticky_assignment(config.partitions, list(model.group), {})
    for name, state in model.group.items():
        state.held = set(model.target[name])
        model.members[name].told = frozenset(state.held)
        model.heard_from(name)
        phase = random.Random(f"{config.seed}:{name}#heartbeat").random()
        sched.call_at(round(phase * model.interval), lambda m=model.members[name]: model.heartbeat(m))
    model.holdings.settle(model.target)
    change_at = config.settle_gap_ms * MS
    sched.run(until=change_at)
    model.counting = True
    model.holdings.start()
    epoch = model.group_epoch
    members = list(model.members.values())
    if config.churn == "join":
        model.incumbents = {m.name for m in members}
        name = member_name(config.members, width)
        joiner = _Member(name, config.latency.sampler(config.seed, name))
        model.members[name] = joiner
        sched.call_at(change_at, lambda: model.join(joiner))
    else:
        gone = members[-1]
        model.incumbents = {m.name for m in members[:-1]}
        sched.call_at(change_at, lambda: model.leave(gone) if config.churn == "leave" else model.crash(gone))
    horizon = change_at + config.session_timeout_ms * MS * 4 + 4 * model.interval

    def done() -> bool:
        return sched.now >= change_at and model.group_epoch > epoch and model.settled()

    sched.run(until=horizon, stop=done)
    settled = done()
    live = [model.members[name] for name in model.group]
    finished = max((m.stable_at for m in live), default=sched.now) if settled else sched.now
    finished = max(finished, change_at)
    outcome = model.holdings.outcome(model.group, finished)
    times = split(change_at, finished if settled else None, model.noticed.values())
    return CoordinatorPrediction(
        members=config.members, partitions=config.partitions, churn=config.churn, seed=config.seed,
        requests_by_api=dict(sorted(model.counts.items())), coordination=model.coordination, settled=settled,
        time_to_stable_s=(finished - change_at) / S if settled else None, generations=model.epochs_formed,
        partitions_moved=outcome.partitions_moved, wall_s=round(time.perf_counter() - began, 3), design=CONSUMER,
        heartbeats=model.heartbeats, noticing_s=times.noticing_s, rebalancing_s=times.rebalancing_s,
        revoked=bool(outcome.revoked_members & model.incumbents), revoked_kept=outcome.revoked_kept,
        unowned_partition_s=outcome.unowned_partition_s, epoch_zero=model.epoch_zero)
