"""Time to stable split in two: waiting for the incumbents to notice a change, and the rebalance itself.

A change (a join, a leave, a kill, ...) is recorded before it is made (zkconsumer/lab/runs/case_run.py), and its time to
stable runs from that record to the last member's own record of the settled state. Inside it:

- noticing: from the change to the moment the last incumbent heard of it. An incumbent is a member that the
  change does not name (not the joiner, not the one leaving) and that shows, on the wire, that it heard:
  classic protocol (eager, cooperative), its first REBALANCE_IN_PROGRESS response (a Heartbeat, SyncGroup or
  OffsetCommit answered so by `GroupCoordinator`) or JoinGroup request after the change, whichever comes first;
  consumer protocol (KIP-848), its first ConsumerGroupHeartbeat response that carries a new assignment (the
  coordinator hands out a changed target only in a heartbeat's answer); ZooKeeper designs, its first watch
  notification after the change (the proxy's `event` records). Only wire records count, as the
  proxies saw them: never a member's own word.
- rebalancing: the rest of the time to stable (the rebalance the last incumbent then ran, and whatever the
  others still had to do).

Where no incumbent heard anything inside the change's time to stable (a join into an empty group), noticing is 0:
there was nobody to wait for. The coordinator's incumbents hear at their next heartbeat, so its noticing time is
the wait for a timer, which is why the churn's phase against that timer is drawn (docs/scenarios.md, `spread`);
the ZooKeeper design's notifications are pushed by the server when the change is written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

# REBALANCE_NOTICE and TARGET_API are imported from here by the analysis (and its Spark oracle)
from zkconsumer.lab.rules.protocol import (  # noqa: F401
    KAFKA_PROTO,
    NOTIFICATION,
    REBALANCE_NOTICE,
    REQUEST,
    TARGET_API,
    ZK_PROTO,
    wire_category,
)

# Membership records that start a change the orchestrator times: each adds max(1, members) to the change number
# that `stable` records name (zkconsumer/lab/runs/case_run.py).
CHANGE_ACTIONS = ("join", "leave", "kill", "expire", "add_partitions", "resume", "pause", "migrate")
REJOIN_API = "JoinGroup"


def notice_member(record: dict[str, Any]) -> str | None:
    """The member whose hearing of a change this wire record shows, or None: a notification (the wire's category,
    protocol_rules.wire_category), or a JoinGroup request (a classic member that rejoins has heard)."""
    if record.get("type") != "wire":
        return None
    proto, kind = record.get("proto"), record.get("kind")
    category = wire_category(proto, kind, record.get("error_name"), record.get("api_name"), record.get("assigned"))
    rejoin = proto == KAFKA_PROTO and category == REQUEST and record.get("api_name") == REJOIN_API
    if category != NOTIFICATION and not rejoin:
        return None
    return record.get("link") if proto == ZK_PROTO else record.get("link") or record.get("client_id")


@dataclass(frozen=True)
class Split:
    noticing_s: float  # change -> the last incumbent's first notice
    rebalancing_s: float  # the rest of the time to stable
    incumbents: int  # members that noticed inside the time to stable


def split(change_ts: float, stable_s: float, changed: Collection[str], notices: Iterable[tuple[float, str]]) -> Split:
    """Split one change's `stable_s` given every (ts, member) notice of the run (`notice_member`)."""
    end = change_ts + stable_s
    first: dict[str, float] = {}
    for ts, member in notices:
        if member in changed or ts < change_ts or ts > end:
            continue
        if ts < first.get(member, end + 1):
            first[member] = ts
    noticing = max(first.values()) - change_ts if first else 0.0
    return Split(noticing, stable_s - noticing, len(first))
