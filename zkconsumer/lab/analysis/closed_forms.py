"""What one member joining a settled group of N costs by each design's protocol alone, as the analysis uses it.

The formulas are defined once, in `zkconsumer.lab.join_cost` (docs/join-cost.md) and `zkconsumer.lab.identities`
(docs/coordinator.md); this module only says which of them applies to a run and a metric:

* ZooKeeper requests of a join without an owner conflict, M = N + 1 members after it, B = 1 broker (the lab's):
  ours rebalance-only (`--members threads`) M² + 7·M + 3·P + 3, ours with fetchers + (1 + B)·M more (each
  member's leader finder), the original M² + (9 + 2·B)·M + 3·P + 2 (+ (1 + B)·M with fetchers). Commits of consumed
  offsets come on top where members fetch, so a run with fetchers may exceed its closed form by its commits;
* watch notifications: every incumbent is notified once that /ids changed (N);
* the coordinator: JoinGroup + SyncGroup + LeaveGroup = (N + 2) + (N + 1) + 0 = 2·N + 3, one generation, and one
  REBALANCE_IN_PROGRESS response per incumbent (its heartbeat's or commit's answer is how it hears of the join).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from zkconsumer.lab.designs import ZOOKEEPER_DESIGNS
from zkconsumer.lab.identities import coordinator_join
from zkconsumer.lab.join_cost import join_notifications, join_requests, original_join_requests
from zkconsumer.lab.protocol_rules import COORDINATION_APIS

BROKERS = 1  # the lab runs one broker (docs/lab.md)


@dataclass(frozen=True)
class ClosedForm:
    value: float
    formula: str  # how it reads in docs/join-cost.md, M = N + 1


def single_joins(runs: list[dict[str, Any]], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs with at least one counted change, every one of them a single member joining (the herd's shape)."""
    counted: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for change in changes:
        if change.get("counted"):
            counted[change["run_id"]].append(change)
    return [run for run in runs
            if run.get("members") is not None and run.get("partitions") and counted.get(run["run_id"])
            and all(c["action"] == "join" and "," not in (c.get("change_members") or "")
                    for c in counted[run["run_id"]])]


def _coordination(n: int) -> int:
    expected = {i.name: i.expected for i in coordinator_join(n, {}, 0)}
    return sum(expected[api] for api in COORDINATION_APIS)


def closed_form(design: str, process_mode: str | None, metric: str, n: int, partitions: int) -> ClosedForm | None:
    """The per-change value `metric` (a runs-table column) takes for one conflict-free join into N, or None when
    the protocol does not fix it."""
    m, p, fetchers = n + 1, partitions, process_mode == "processes"
    if design in ZOOKEEPER_DESIGNS and metric == "zk_notifications_per_change":
        return ClosedForm(join_notifications(m), "N")
    if design == "coordinator" and metric == "rebalance_notices_per_change":
        return ClosedForm(n, "N")
    if design == "coordinator" and metric == "kafka_coordination_per_change":
        return ClosedForm(_coordination(n), "2·N + 3")
    if metric != "zk_requests_per_change":
        return None
    if design == "zk":
        base = join_requests(m, p, BROKERS)
        if fetchers:
            return ClosedForm(base + (1 + BROKERS) * m, "M² + 9·M + 3·P + 3")
        return ClosedForm(base, "M² + 7·M + 3·P + 3")
    if design == "original":
        label = "M² + 13·M + 3·P + 2" if fetchers else "M² + 11·M + 3·P + 2"
        return ClosedForm(original_join_requests(m, p, BROKERS, fetchers=fetchers), label)
    return None
