"""`lab run --settings shipped`: each broker-side design at the group settings its client and broker ship with,
instead of the scenario's one session and one heartbeat for all (docs/designs.md, "Same settings or out of the
box").

The scenario's `[coordinator]` section gives every broker-side design the same session timeout and heartbeat
interval, so each notices a change after the same wait and the comparison is of the protocols. Users run the
defaults, though, and the defaults differ by design: what a change costs out of the box is the other question.
Here a case is rewritten per design with these values; the schedule (the churn's drawn times) stays the case's,
so every design still meets the same changes at the same moments. The ZooKeeper designs' settings are Kafka 0.8's
own defaults unless the scenario's `[zk]` sets them, in either mode.

Where each value comes from:
- eager (kafka-python 3.0.12): `KafkaConsumer.DEFAULT_CONFIG`, read from the installed client;
- cooperative (librdkafka 2.16): `session.timeout.ms` 45000, `heartbeat.interval.ms` 3000,
  `max.poll.interval.ms` 300000, `topic.metadata.refresh.interval.ms` 300000 (librdkafka's CONFIGURATION.md);
- consumer protocol (KIP-848): the broker's `group.consumer.session.timeout.ms` 45000 and
  `group.consumer.heartbeat.interval.ms` 5000 (Kafka 4's `GroupCoordinatorConfig`);
- every classic group: the broker's `group.initial.rebalance.delay.ms` 3000 (`GroupCoordinatorConfig`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from zkconsumer.lab.designs import is_consumer_protocol
from zkconsumer.lab.scenarios.model import Case

GroupSettings = Literal["same", "shipped"]
SETTINGS: tuple[str, ...] = ("same", "shipped")
BROKER_INITIAL_REBALANCE_DELAY_MS = 3000
LIBRDKAFKA = {"session_timeout_ms": 45000, "heartbeat_interval_ms": 3000, "max_poll_interval_ms": 300_000,
              "metadata_max_age_ms": 300_000}
CONSUMER_PROTOCOL = {"session_timeout_ms": 45000, "heartbeat_interval_ms": 5000}


def shipped_coordinator_settings(design: str) -> dict[str, int]:
    """The `[coordinator]` values `design` ships with (empty for the ZooKeeper designs)."""
    if design == "coordinator":
        from kafka import KafkaConsumer

        defaults = KafkaConsumer.DEFAULT_CONFIG
        values = {key: int(defaults[key]) for key in ("session_timeout_ms", "heartbeat_interval_ms",
                                                      "max_poll_interval_ms", "metadata_max_age_ms")}
    elif design == "cooperative":
        values = dict(LIBRDKAFKA)
    elif is_consumer_protocol(design):
        values = dict(CONSUMER_PROTOCOL)
    else:
        return {}
    return {**values, "initial_rebalance_delay_ms": BROKER_INITIAL_REBALANCE_DELAY_MS}


def case_for(case: Case, design: str, settings: GroupSettings) -> Case:
    """`case` as `design` runs it under `settings` (unchanged for "same" and for the ZooKeeper designs)."""
    values = shipped_coordinator_settings(design) if settings == "shipped" else {}
    if not values:
        return case
    coordinator = case.scenario.coordinator.model_copy(update=values)
    # The settle bound must outlast the longest session, or a crash could never be seen settled.
    settle = max(case.scenario.settle_timeout, 2 * values["session_timeout_ms"] / 1000)
    scenario = case.scenario.model_copy(update={"coordinator": coordinator, "settle_timeout": settle})
    return dataclasses.replace(case, scenario=scenario)
