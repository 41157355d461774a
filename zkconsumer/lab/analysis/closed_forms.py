"""What one member joining a settled group of N costs by each design's protocol alone, as the analysis uses it.

The formulas are defined once, in `zkconsumer.lab.rules.join_cost` (docs/join-cost.md) and
`zkconsumer.lab.rules.identities`
(docs/coordinator.md); this module only says which of them applies to a run and a metric:

* ZooKeeper requests of a join without an owner conflict, M = N + 1 members after it, B = 1 broker (the lab's):
  ours rebalance-only (`--members threads`) M² + 7·M + 3·P + 3, ours with fetchers + (1 + B)·M more (each
  member's leader finder), the original M² + (9 + 2·B)·M + 3·P + 2 (+ (1 + B)·M with fetchers). Commits of consumed
  offsets come on top where members fetch, so a run with fetchers may exceed its closed form by its commits;
* watch notifications: every incumbent is notified once that /ids changed (N);
* the coordinator: JoinGroup + SyncGroup + LeaveGroup = (N + 2) + (N + 1) + 0 = 2·N + 3, one generation, and one
  REBALANCE_IN_PROGRESS response per incumbent (its heartbeat's or commit's answer is how it hears of the join);
* the cooperative design (KIP-429): with a revoke, a second generation every member joins, so (2·N + 3) + (2·N + 2)
  = 4·N + 5 coordination requests. A join into N with P > N partitions always revokes (cooperative-sticky gives the
  joiner at least one partition, and every partition is an incumbent's), so that is the herd's closed form;
* the consumer protocol (KIP-848): no JoinGroup, SyncGroup or LeaveGroup, one epoch-0 heartbeat, one group epoch;
  its acknowledging heartbeats depend on how the incumbents' releases interleave, so its coordination requests per
  join have no closed form.

`protocol_identities` evaluates identities.broker_side_join on one run's counts and names each expected value's
formula in N, read off the identity itself (`linear`), so no formula is spelled twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, ZOOKEEPER_DESIGNS
from zkconsumer.lab.rules.identities import Identity, broker_side_join
from zkconsumer.lab.rules.join_cost import join_notifications, join_requests, original_join_requests
from zkconsumer.lab.rules.protocol import COORDINATION_APIS

BROKERS = 1  # the lab runs one broker (docs/lab.md)
# The requests the broker-side identities count, each a column of the runs table (per_run.counts.identity_counts)
IDENTITY_APIS = (*COORDINATION_APIS, "FindCoordinator")
API_COLUMNS = {api: "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(api))
               + "_requests" for api in IDENTITY_APIS}  # JoinGroup -> join_group_requests


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


def linear(expected: Callable[[int], int]) -> str:
    """How `expected` (an identity's count against N) reads: "2·N + 3", "N + 1", "0"."""
    b, a = expected(0), expected(1) - expected(0)
    if any(expected(n) != a * n + b for n in (2, 3, 64)):
        raise ValueError("an identity that is not linear in N has no formula here")
    term = "" if a == 0 else "N" if a == 1 else f"{a}·N"
    if not term:
        return str(b)
    return term if b == 0 else f"{term} + {b}" if b > 0 else f"{term} - {-b}"


def _expected(design: str, n: int, revoked: bool) -> dict[str, int]:
    return {i.name: i.expected for i in broker_side_join(design, n, {}, 0, revoked, 0)}


def _coordination(design: str, n: int, revoked: bool) -> int | None:
    expected = _expected(design, n, revoked)
    if not all(api in expected for api in COORDINATION_APIS):
        return None  # the consumer protocol's acknowledgements are not fixed by it
    return sum(expected[api] for api in COORDINATION_APIS)


def protocol_identities(design: str, n: int, by_api: dict[str, int], rounds: int, revoked: bool,
                        epoch_zero: int) -> list[tuple[Identity, str]]:
    """identities.broker_side_join on one single-join run, each with its expected value's formula in N."""
    found = broker_side_join(design, n, by_api, rounds, revoked, epoch_zero)
    return [(i, linear(lambda k, name=i.name: _expected(design, k, revoked)[name])) for i in found]


def closed_form(design: str, process_mode: str | None, metric: str, n: int, partitions: int) -> ClosedForm | None:
    """The per-change value `metric` (a runs-table column) takes for one conflict-free join into N, or None when
    the protocol does not fix it."""
    m, p, fetchers = n + 1, partitions, process_mode == "processes"
    if design in ZOOKEEPER_DESIGNS and metric == "zk_notifications_per_change":
        return ClosedForm(join_notifications(m), "N")
    if design == "coordinator" and metric == "rebalance_notices_per_change":
        return ClosedForm(n, "N")
    if design in BROKER_SIDE_DESIGNS and metric == "kafka_coordination_per_change":
        # a cooperative join revokes when the joiner's share is a partition or more (the module docstring)
        revoked = partitions > n
        if _coordination(design, n, revoked) is None:
            return None
        return ClosedForm(_coordination(design, n, revoked),
                          linear(lambda k: _coordination(design, k, revoked) or 0))
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
