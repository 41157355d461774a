"""The campaign's generator: which faults, in which order, held for how long — drawn from the seed alone.

A plan is fixed before the first fault: the kinds (uniformly, each kind at least once when there are enough
faults, so that a short campaign still meets every kind) and each fault's hold and parameters. Targets (which
member, which broker) are drawn when the fault is applied, from the plan's own random stream and the group as it
is then, so one seed gives one campaign. Nothing here looks at an outcome: a seed is never chosen by its result.

The holds are relative to the consumer's session timeout where the fault is about it (docs/chaos.md):
- a pause is held beyond the session timeout (the long GC pause that wakes up believing it still owns);
- a cut from ZooKeeper is held either shorter or longer than it (both sides of the partition question);
- a killed member is restarted under the same name after 0 to 2 session timeouts (the restart trap when quick).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

MEMBER_KILL = "member_kill"
MEMBER_PAUSE = "member_pause"
SESSION_EXPIRY = "session_expiry"
ZK_LEADER_KILL = "zk_leader_kill"
ZK_ENSEMBLE_STOP = "zk_ensemble_stop"
BROKER_KILL = "broker_kill"
MEMBER_ZK_CUT = "member_zk_cut"
MEMBER_KAFKA_CUT = "member_kafka_cut"
MEMBER_ZK_DELAY = "member_zk_delay"
MALFORMED_REGISTRATION = "malformed_registration"
MALFORMED_OWNER = "malformed_owner"
MALFORMED_OFFSET = "malformed_offset"

FAULT_KINDS = (MEMBER_KILL, MEMBER_PAUSE, SESSION_EXPIRY, ZK_LEADER_KILL, ZK_ENSEMBLE_STOP, BROKER_KILL,
               MEMBER_ZK_CUT, MEMBER_KAFKA_CUT, MEMBER_ZK_DELAY, MALFORMED_REGISTRATION, MALFORMED_OWNER,
               MALFORMED_OFFSET)
MEMBER_FAULTS = frozenset({MEMBER_KILL, MEMBER_PAUSE, SESSION_EXPIRY, MEMBER_ZK_CUT, MEMBER_KAFKA_CUT,
                           MEMBER_ZK_DELAY})
ENSEMBLE_STOP_S = 30.0  # "the whole ensemble stopped for 30 s"


@dataclass(frozen=True)
class FaultSpec:
    fault_id: int
    kind: str
    hold_s: float  # from injection to heal
    params: dict[str, Any] = field(default_factory=dict)


def parse_kinds(text: str | None) -> tuple[str, ...]:
    """`--kinds a,b`: a subset of FAULT_KINDS (all of them when empty); an unknown name is refused by name."""
    if not text:
        return FAULT_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}: choose from {', '.join(FAULT_KINDS)}")
    return kinds


def plan_faults(count: int, seed: int, session_timeout_s: float,
                kinds: tuple[str, ...] = FAULT_KINDS) -> list[FaultSpec]:
    """`count` faults drawn from `seed`: every kind once (in a drawn order) while the count allows, the rest
    uniformly."""
    if count < 0:
        raise ValueError(f"the number of faults must not be negative, got {count}")
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    chosen = order[:count] + [rng.choice(kinds) for _ in range(count - len(order))]
    return [_spec(i, kind, rng, session_timeout_s) for i, kind in enumerate(chosen, start=1)]


def _spec(fault_id: int, kind: str, rng: random.Random, session_s: float) -> FaultSpec:
    def hold(low: float, high: float) -> float:
        return round(rng.uniform(low, high), 2)

    if kind == MEMBER_KILL:
        return FaultSpec(fault_id, kind, hold(0.0, 2 * session_s))
    if kind == MEMBER_PAUSE:
        return FaultSpec(fault_id, kind, hold(session_s + 1.0, session_s + 4.0))
    if kind == MEMBER_ZK_CUT:
        return FaultSpec(fault_id, kind, hold(0.3 * session_s, 2 * session_s))
    if kind == MEMBER_KAFKA_CUT:
        return FaultSpec(fault_id, kind, hold(2.0, 10.0))
    if kind == MEMBER_ZK_DELAY:
        return FaultSpec(fault_id, kind, hold(5.0, 10.0), {"delay_ms": rng.randint(200, 2000)})
    if kind == ZK_LEADER_KILL:
        return FaultSpec(fault_id, kind, hold(2.0, 5.0))
    if kind == ZK_ENSEMBLE_STOP:
        return FaultSpec(fault_id, kind, ENSEMBLE_STOP_S)
    if kind == BROKER_KILL:
        return FaultSpec(fault_id, kind, hold(3.0, 8.0))
    if kind == SESSION_EXPIRY:
        return FaultSpec(fault_id, kind, 0.0)
    if kind in (MALFORMED_REGISTRATION, MALFORMED_OWNER, MALFORMED_OFFSET):
        return FaultSpec(fault_id, kind, hold(1.0, 4.0))
    raise ValueError(f"unknown fault kind {kind!r}")
