"""One-screen summary of lab runs, computed from their traces (never from the members' own words alone).

The window is the churn: from the `settled` phase (the initial group stable) to `done` (after the last
change settled). Wire counts are what the proxies saw in that window: ZooKeeper requests (pings and the
connect handshake excluded) and watch notifications; Kafka group-coordination requests (JoinGroup,
SyncGroup, LeaveGroup, and the consumer protocol's ConsumerGroupHeartbeats that join, leave or acknowledge:
rules/protocol.py) with heartbeats counted apart, since they grow with time, not with changes.

Connection losses (`rules/reconnects.py`): a member's ZooKeeper connection that dropped and resumed its session inside
the
window, counted on the wire (`zk_reconnections`) and in the members' events (`connection_losses`), with the requests
sent again after them (`resent_requests`). A ZooKeeper design's single join of rebalance-only members (`--members
threads`) without an owner conflict is checked against its closed form (docs/join-cost.md) as
`identities.zk_join`: "formula F + re-sent R after N connection losses = measured M" when the window had losses.

`first_owned_s` is from the first join of the window to the first partition any member owns after it (ZooKeeper
design: a successful owner claim; coordinator: an assignment with partitions): what a rolling start into an
empty group waits before anything is consumed, which the broker's initial rebalance delay lengthens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.event_log import LineErrors
from zkconsumer.lab.designs import FAITHFUL, design_label, is_broker_side, is_zookeeper_design
from zkconsumer.lab.rules import gaps, identities, reconnects
from zkconsumer.lab.rules.handover import Handover
from zkconsumer.lab.rules.noticing import CHANGE_ACTIONS, notice_member, split
from zkconsumer.lab.rules.protocol import (
    GROUP_HEARTBEAT_API,
    KAFKA_PROTO,
    NOTIFICATION,
    REQUEST,
    ZK_PROTO,
    is_conflict,
    is_coordination_request,
    is_failed_attempt,
    is_heartbeat,
    wire_category,
)
from zkconsumer.lab.trace import RunDirectory, read_traces


@dataclass
class RunSummary:
    path: Path
    design: str
    case: str
    sweep: dict[str, Any]
    completed: bool
    members: int  # initial group size
    changes: int = 0  # membership changes in the window (each member joining or leaving counts one)
    rebalances: int = 0  # ZooKeeper designs: syncedRebalance runs of all members; coordinator: generations
    attempts: int = 0
    failed_attempts: int = 0
    conflicts: int = 0
    failures: int = 0
    zk_requests: int = 0
    zk_notifications: int = 0
    zk_by_op: Counter = field(default_factory=Counter)
    kafka_coordination: int = 0  # protocol_rules.is_coordination_request
    kafka_heartbeats: int = 0  # liveness only (protocol_rules.is_heartbeat)
    # Broker-side designs, from the wire: generations (JoinGroup answers) or group epochs (ConsumerGroupHeartbeat
    # answers) formed in the window, and the consumer protocol's joins (member epoch 0)
    wire_rounds: int = 0
    epoch_zero: int = 0
    incumbent_revoked: bool = False
    kafka_by_api: Counter = field(default_factory=Counter)
    kafka_errors: Counter = field(default_factory=Counter)  # "api/ERROR_NAME" of responses with an error code
    stable_s: list[float] = field(default_factory=list)
    # stable_s split (zkconsumer/lab/rules/noticing.py), one each per stable record: waiting for the incumbents to
    # notice
    # the change, and the rebalance itself; None where the record's change is not in the window
    noticing_s: list[float | None] = field(default_factory=list)
    rebalancing_s: list[float | None] = field(default_factory=list)
    first_owned_s: float | None = None
    joins: int = 0
    identities: list[identities.Identity] = field(default_factory=list)  # checked where they apply (one join)
    # Counting gaps over the whole run (zkconsumer/lab/rules/gaps.py): streams the proxies could not decode, requests
    # sent into a blackhole, trace lines the reader skipped
    undecodable: int = 0
    blackholed: int = 0
    bad_lines: int = 0
    mode: str = FAITHFUL  # the zk design's opt-in mode (zkconsumer/modes.py)
    process_mode: str | None = None  # members as processes or threads (the manifest's)
    partitions: int = 0  # every partition of the scenario's topics
    owner_conflicts: int = 0  # owner-node creates ZooKeeper refused (NodeExists): a join that raced
    # Connection losses in the window (rules/reconnects.py): the wire's session reconnections, the members' losses, and
    # the requests sent again after them (the members' `resent` events and kazoo's watches re-armed on the wire)
    reconnects: reconnects.Reconnects = field(default_factory=reconnects.Reconnects)
    # What the window cost the partitions (rules/handover.py): owners changed, and partitions revoked from members that
    # got them back (the stop-the-world of an eager protocol); None where the run cannot tell
    moved: int | None = None
    revoked_kept: int | None = None

    @property
    def zk_reconnections(self) -> int:
        return self.reconnects.reconnections

    @property
    def connection_losses(self) -> int:
        return self.reconnects.losses

    @property
    def resent_requests(self) -> int:
        return self.reconnects.re_sent

    @property
    def label(self) -> str:
        """The design, with the mode of a mode's run: `zk+incremental`."""
        return design_label(self.design, self.mode)

    @property
    def identities_hold(self) -> bool | None:
        """None where no identity applies to the run."""
        return all(i.holds for i in self.identities) if self.identities else None

    def per_change(self, value: int) -> float | None:
        return value / self.changes if self.changes else None

    @property
    def counting_gaps(self) -> str | None:
        """Why the run's counts are incomplete ("2 undecodable streams, ..."), or None."""
        return gaps.describe(self.undecodable, self.blackholed, self.bad_lines)

    @property
    def time_to_stable(self) -> float | None:
        return max(self.stable_s) if self.stable_s else None

    @property
    def stable_split(self) -> tuple[float | None, float | None]:
        """(noticing, rebalancing) of the change whose time to stable is `time_to_stable`."""
        if not self.stable_s:
            return None, None
        i = max(range(len(self.stable_s)), key=self.stable_s.__getitem__)
        return self.noticing_s[i], self.rebalancing_s[i]


def summarize(run_dir: Path) -> RunSummary:
    manifest = RunDirectory.load(run_dir)
    definition = manifest.get("scenario_definition", {})
    group = definition.get("group", {})
    summary = RunSummary(run_dir, manifest["design"], manifest["case"], manifest.get("sweep", {}),
                         bool(manifest.get("completed")), group.get("members", 0),
                         mode=manifest.get("mode", FAITHFUL),
                         process_mode=manifest.get("process_mode") or group.get("process_mode"),
                         partitions=sum(int(t.get("partitions", 0)) for t in group.get("topics", [])))
    errors = LineErrors()
    records = sorted(read_traces(run_dir, errors), key=lambda r: r.get("ts") or 0.0)
    summary.bad_lines = errors.count
    summary.undecodable = sum(map(gaps.is_undecodable, records))
    summary.blackholed = sum(map(gaps.is_blackholed_request, records))
    start = next((r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "settled"), None)
    end = next((r["ts"] for r in records if r["type"] == "phase" and r["phase"] == "done"), None)
    generations: set[int] = set()
    first_join: float | None = None
    number = 0
    changed: dict[int, tuple[float, list[str]]] = {}  # change number (case_run.py's) -> (its record's ts, members)
    stables: list[tuple[int, float]] = []  # (change number, duration_s) of each stable record
    notices: list[tuple[float, str]] = []
    handover = Handover()
    epoch_before = -1  # the newest generation or group epoch answered before the window
    epochs: set[int] = set()
    for record in records:
        ts = record.get("ts") or 0.0
        epoch = _answered_epoch(record)
        if epoch is not None:
            if start is not None and ts < start:
                epoch_before = max(epoch_before, epoch)
            elif start is not None and (end is None or ts <= end):
                epochs.add(epoch)
        if start is not None and ts >= start and not handover.started:
            handover.start()
        if end is not None and ts > end and not handover.ended:
            handover.end()
        handover.fold(record)
        if start is None or ts < start or (end is not None and ts > end):
            continue
        _count(summary, record, generations)
        if record["type"] == "membership" and record.get("action") in CHANGE_ACTIONS:
            number += max(1, len(record.get("members") or ()))
            changed[number] = (ts, list(record.get("members") or ()))
        elif record["type"] == "stable":
            stables.append((record.get("generation_or_rebalance"), record["duration_s"]))
        elif (member := notice_member(record)) is not None:
            notices.append((ts, member))
        if first_join is None and record["type"] == "membership" and record["action"] == "join":
            first_join = ts
        elif first_join is not None and summary.first_owned_s is None and _owns_something(record):
            summary.first_owned_s = ts - first_join
    if start is not None:
        summary.moved, summary.revoked_kept = handover.moved, handover.revoked_kept_or_none
    for change, duration in stables:
        parts = split(changed[change][0], duration, changed[change][1], notices) if change in changed else None
        summary.noticing_s.append(parts.noticing_s if parts else None)
        summary.rebalancing_s.append(parts.rebalancing_s if parts else None)
    summary.wire_rounds = sum(1 for e in epochs if e > epoch_before)
    # eager members report the group's generation themselves; librdkafka's cannot, so the wire counts those
    summary.rebalances = (summary.rebalances if is_zookeeper_design(summary.design)
                          else len(generations) if generations else summary.wire_rounds)
    if start is not None:
        summary.reconnects = reconnects.count(records, start, end)
    single = identities.single_join(summary.joins, summary.changes - summary.joins)
    if is_broker_side(summary.design) and single:
        summary.identities = identities.broker_side_join(
            summary.design, summary.members, dict(summary.kafka_by_api), summary.rebalances,
            summary.incumbent_revoked, summary.epoch_zero)
    elif is_zookeeper_design(summary.design) and single and (check := _zk_identity(summary)) is not None:
        summary.identities = [check]
    return summary


def _zk_identity(summary: RunSummary) -> identities.RequestIdentity | None:
    """The join's ZooKeeper requests against its closed form, where one applies (closed_forms.py): rebalance-only
    members (threads: no commits), no owner conflict, no failed attempt, in the faithful mode."""
    from zkconsumer.lab.analysis.closed_forms import closed_form

    # a re-sent create that met the member's own node is no race: its checks are among the re-sent requests
    raced = summary.owner_conflicts - summary.reconnects.refused_owners
    if (summary.process_mode != "threads" or summary.conflicts or raced or summary.failed_attempts
            or summary.mode != FAITHFUL or not summary.partitions):
        return None
    form = closed_form(summary.design, summary.process_mode, "zk_requests_per_change", summary.members,
                       summary.partitions)
    if form is None:
        return None
    found = summary.reconnects
    return identities.zk_join(int(form.value), summary.zk_requests, found.re_sent, found.losses, found.reconnections)


def _category(record: dict[str, Any]) -> str | None:
    return wire_category(record.get("proto"), record.get("kind"), record.get("error_name"), record.get("api_name"),
                         record.get("assigned"))


def _count(summary: RunSummary, record: dict[str, Any], generations: set[int]) -> None:
    kind = record.get("kind")
    match record["type"]:
        case "membership" if record["action"] in ("join", "leave", "kill", "expire", "pause", "migrate"):
            summary.changes += max(1, len(record.get("members", ())))
            summary.joins += len(record.get("members", ())) if record["action"] == "join" else 0
        case "stable":
            summary.stable_s.append(record["duration_s"])
        case "member_event" if kind == "rebalance_begin":
            summary.rebalances += 1
        case "member_event" if kind == "attempt_end":
            summary.attempts += 1
            result = record.get("result")
            summary.failed_attempts += is_failed_attempt(result)
            summary.conflicts += is_conflict(result)
        case "member_event" if kind == "rebalance_failed":
            summary.failures += 1
        case "generation" if kind == "assigned" and record.get("generation") is not None:
            generations.add(record["generation"])
        case "generation" if kind == "revoked" and record.get("partitions"):
            # a join's joiner owns nothing to revoke: whoever revokes in a join window is an incumbent
            summary.incumbent_revoked = True
        case "wire" if record.get("proto") == ZK_PROTO and _category(record) == REQUEST:
            summary.zk_requests += 1
            summary.zk_by_op[record.get("op")] += 1
        case "wire" if (record.get("proto") == "zk" and kind == "reply" and record.get("err_name") == "NodeExists"
                        and "/owners/" in (record.get("path") or "")):
            summary.owner_conflicts += 1
        case "wire" if record.get("proto") == ZK_PROTO and _category(record) == NOTIFICATION:
            summary.zk_notifications += 1
        case "wire" if record.get("proto") == KAFKA_PROTO and _category(record) == REQUEST:
            api, epoch, owned = record.get("api_name"), record.get("member_epoch"), record.get("owned")
            summary.kafka_by_api[api] += 1
            summary.kafka_coordination += is_coordination_request(api, epoch, owned)
            summary.kafka_heartbeats += is_heartbeat(api, epoch, owned)
            summary.epoch_zero += api == GROUP_HEARTBEAT_API and epoch == 0
        case "wire" if record.get("proto") == "kafka" and kind == "response" and record.get("error_code"):
            # e.g. Heartbeat/REBALANCE_IN_PROGRESS: how incumbents hear of a rebalance (one per incumbent)
            summary.kafka_errors[f"{record.get('api_name')}/{record.get('error_name')}"] += 1


def _answered_epoch(record: dict[str, Any]) -> int | None:
    """The generation (JoinGroup) or group epoch (ConsumerGroupHeartbeat) a coordinator's answer carries."""
    if record.get("type") != "wire" or record.get("proto") != "kafka" or record.get("kind") != "response":
        return None
    epoch = record.get("epoch_after")
    return epoch if isinstance(epoch, int) and epoch > 0 else None


def _owns_something(record: dict[str, Any]) -> bool:
    if record["type"] == "member_event":
        return record.get("kind") == "claim" and bool(record.get("ok"))
    return record["type"] == "generation" and record.get("kind") == "assigned" and bool(record.get("partitions"))


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if value < 100 else f"{value:.0f}"
