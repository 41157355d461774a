"""The opt-in modes beyond 0.8.2, named once: each is a set of `zkconsumer.*` consumer properties (sticky sets
`partition.assignment.strategy`).

"faithful" sets nothing (Kafka 0.8.2.2's behaviour, byte for byte); "all" is every `zkconsumer.*` mode together.
What each mode fixes, what it costs and whether it is safe beside faithful members: docs/modes.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rebalance.listener_types import ModeSettings

if TYPE_CHECKING:
    from zkconsumer.config import ConsumerConfig

# The settle window the lab and the docs use for patient membership: longer than the gap between the joins of a
# burst (staggered-join: 0.1 s) plus a notification's latency, short against a session timeout.
PATIENT_WINDOW_MS = 300

MODES: dict[str, dict[str, str]] = {
    "faithful": {},
    "incremental": {"zkconsumer.incremental.ownership": "true"},
    "patient": {"zkconsumer.patient.membership.ms": str(PATIENT_WINDOW_MS)},
    "claim-on-deletion": {"zkconsumer.claim.on.deletion": "true"},
    "barrier": {"zkconsumer.consensus.barrier": "true"},
    # a strategy, not a zkconsumer.* key: the sticky assignor every member agrees on (not part of "all")
    "sticky": {"partition.assignment.strategy": "sticky"},
}
MODES["all"] = {k: v for name in ("incremental", "patient", "claim-on-deletion", "barrier")
                for k, v in MODES[name].items()}


def mode_properties(name: str) -> dict[str, str]:
    """The consumer properties of mode `name`, or of a combination `a+b+...` of modes; a ValueError naming the modes
    there are for an unknown one."""
    properties: dict[str, str] = {}
    for part in name.split("+"):
        if part not in MODES:
            raise ValueError(f"unknown mode {part!r} in {name!r}: choose one of {', '.join(MODES)}, or join "
                             "several with '+' (e.g. incremental+claim-on-deletion)")
        properties.update(MODES[part])
    return properties


def is_mode(name: str) -> bool:
    """A mode of MODES or a '+' combination of them."""
    try:
        mode_properties(name)
    except ValueError:
        return False
    return True


def mode_settings(config: ConsumerConfig) -> ModeSettings:
    """The listener's view of a config's `zkconsumer.*` keys."""
    return ModeSettings(incremental=config.zkconsumer_incremental_ownership,
                        patience_ms=config.zkconsumer_patient_membership_ms,
                        claim_on_deletion=config.zkconsumer_claim_on_deletion,
                        barrier=config.zkconsumer_consensus_barrier)
