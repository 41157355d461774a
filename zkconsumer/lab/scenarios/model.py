"""The records of a lab scenario: pydantic models of the TOML file, cases and steps (member selectors are in
``scenario_selectors``).

Models check what one field can check on its own (types, ranges, unknown keys). Rules that relate fields to
each other live in ``scenario_rules``, the timeline of the churn schedule in ``scenario_timeline``, and how
problems read in ``scenario_issues``; loading and sweep expansion in ``scenario``. Sequences are lists because
that is what TOML gives and strict mode would refuse tuples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from zkconsumer.config import ConsumerConfig
from zkconsumer.lab.designs import DEFAULT_DESIGNS, canonical
from zkconsumer.lab.scenarios.selectors import MemberSelector, NetworkSelector, Selector

_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _slug(value: str) -> str:
    if not _SLUG.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid name: use lowercase letters, digits and '-' (it names files)")
    return value


def _topic_name(value: str) -> str:
    if not _TOPIC.fullmatch(value) or value in (".", ".."):
        raise ValueError(f"{value!r} is not a valid Kafka topic name: use ASCII letters, digits, '.', '_' and '-'")
    return value


class _Model(BaseModel):
    # strict: TOML is typed, so "30" where 30 is meant is a mistake worth reporting, not coercing.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Topic(_Model):
    name: Annotated[str, AfterValidator(_topic_name)]
    partitions: int = Field(ge=1, le=10000)


class Group(_Model):
    members: int = Field(ge=0, description="members started (and settled) before t=0")
    streams: int = Field(1, ge=1, le=64, description="streams (consumer threads) per member")
    process_mode: Literal["processes", "threads"] = "processes"
    topics: list[Topic] = Field(min_length=1)


class CoordinatorSettings(_Model):
    """Group settings of the broker-side designs: the eager design's kafka-python ``KafkaConsumer``, the
    cooperative design's librdkafka consumer, and for the consumer protocol (KIP-848) the KRaft broker's
    `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms` (the broker owns them there):
    one session and one heartbeat for every design, so each notices a change after the same interval."""

    session_timeout_ms: int = Field(6000, ge=1)
    heartbeat_interval_ms: int = Field(2000, ge=1)
    # The consumer protocol's server-side assignor (`group.remote.assignor`): Kafka 4's `uniform` (sticky) or `range`.
    remote_assignor: Literal["uniform", "range"] = "uniform"
    # Also the JoinGroup rebalance timeout: how long the coordinator waits for incumbents to rejoin.
    max_poll_interval_ms: int = Field(30000, ge=1)
    assignor: Literal["range", "roundrobin"] = "range"
    # metadata.max.age.ms: how often a member refreshes metadata, hence how soon the group leader sees partitions
    # added to a subscribed topic and asks for a rebalance (kafka-python's and Kafka's default: 5 minutes).
    metadata_max_age_ms: int = Field(300_000, ge=100)
    # The broker's group.initial.rebalance.delay.ms (GroupCoordinator's InitialDelayedJoin): how long the first
    # join into an empty group waits for more members. A broker setting: the lab runs its embedded broker with
    # it. 0 (what the herd comparison uses) completes that join at once; Kafka's default is 3000.
    initial_rebalance_delay_ms: int = Field(0, ge=0, le=300_000)
    # kafka-python's auto_commit_interval_ms (its default is 5000, Kafka 0.8's auto.commit.interval.ms 60000).
    # Unset, it is the [zk] auto.commit.interval.ms (Scenario.coordinator_commit_interval_ms), so both designs
    # commit alike; set, it must equal that in a scenario that audits delivery (scenario_rules).
    auto_commit_interval_ms: int | None = Field(None, ge=1)


class Load(_Model):
    rate: float = Field(0.0, ge=0, description="messages per second over all topics; 0 = no producer")
    keys: int = Field(0, ge=0, description="distinct keys, 0 = unkeyed")
    message_size: int = Field(100, ge=1, le=1_000_000)


class NetworkRule(_Model):
    members: NetworkSelector = Selector("all")
    target: Literal["zookeeper", "broker"]
    delay_ms: int = Field(ge=0, le=60_000)
    jitter_ms: int = Field(0, ge=0, le=60_000)


HEARTBEAT = "heartbeat"


class _Action(_Model):
    at: float = Field(ge=0, description="seconds after t=0 (the settled initial group)")
    # t = 0 is when the group settled, which is also when every coordinator-design member's heartbeat timer
    # restarted: an action at a fixed `at` would reach the incumbents at the same phase of their heartbeat in
    # every run, and that phase alone decides how long they take to hear of it. A spread draws the action's time
    # uniformly from [at, at + spread) with the case's seed (scenario_timeline.phase_offset): the same draw on
    # every design of the case. "heartbeat" spreads over one coordinator heartbeat interval.
    spread: float | Literal["heartbeat"] = Field(0.0, description="seconds over which the action's time is "
                                                 'drawn after at, or "heartbeat"; 0 = exactly at')

    @field_validator("spread")
    @classmethod
    def _spread_not_negative(cls, spread: float | str) -> float | str:
        if not isinstance(spread, str) and spread < 0:
            raise ValueError(f"spread must be >= 0 seconds or \"heartbeat\", got {spread!r}")
        return spread


class _MemberAction(_Action):
    member: MemberSelector = Selector("newest")
    count: int | None = Field(None, ge=0)


class Join(_Action):
    action: Literal["join"]
    count: int = Field(1, ge=0)
    interval: float = Field(0.0, ge=0, description="seconds between two joiners; 0 = all at once")


class Leave(_MemberAction):
    action: Literal["leave"]


class Kill(_MemberAction):
    action: Literal["kill"]


class Pause(_MemberAction):
    action: Literal["pause"]
    seconds: float = Field(gt=0)


class Expire(_MemberAction):
    action: Literal["expire"]


class Restart(_MemberAction):
    action: Literal["restart"]
    delay: float = Field(0.0, ge=0, description="seconds between the stop and the start with the same id")
    stop: Literal["leave", "kill"] = "leave"


class Migrate(_MemberAction):
    # The way operators left the ZooKeeper design: the member stops cleanly (committing) and a coordinator-design
    # member of the same group id takes its place (docs/migrate.md).
    action: Literal["migrate"]


class AddPartitions(_Action):
    action: Literal["add_partitions"]
    topic: str
    total: int = Field(ge=1, le=10000)


class KillZkLeader(_Action):
    action: Literal["kill_zk_leader"]


class Delay(_Action):
    action: Literal["delay"]
    members: NetworkSelector = Selector("all")
    target: Literal["zookeeper", "broker"]
    delay_ms: int = Field(ge=0, le=60_000)
    jitter_ms: int = Field(0, ge=0, le=60_000)


ACTIONS: dict[str, type[_Action]] = {
    "join": Join, "leave": Leave, "kill": Kill, "pause": Pause, "expire": Expire, "restart": Restart,
    "add_partitions": AddPartitions, "kill_zk_leader": KillZkLeader, "delay": Delay, "migrate": Migrate,
}
MEMBER_ACTIONS = (Leave, Kill, Pause, Expire, Restart, Migrate)
ChurnAction = Annotated[
    Join | Leave | Kill | Pause | Expire | Restart | AddPartitions | KillZkLeader | Delay | Migrate,
    Field(discriminator="action"),
]

# axis -> what one sweep value replaces in the scenario (shown by `lab list` and in errors).
SWEEP_AXES: dict[str, str] = {
    "members": "group.members",
    "joiners": "count of every join action",
    "streams": "group.streams",
    "partitions": "partitions of every topic",
    "delay_ms": "delay_ms of every [[network]] rule",
    "jitter_ms": "jitter_ms of every [[network]] rule",
    "rate": "load.rate",
    "keys": "load.keys",
    "message_size": "load.message_size",
    "session_timeout_ms": "zk zookeeper.session.timeout.ms and coordinator.session_timeout_ms",
    "heartbeat_interval_ms": "coordinator.heartbeat_interval_ms",
    "initial_rebalance_delay_ms": "coordinator.initial_rebalance_delay_ms (the broker's)",
    "rebalance_backoff_ms": "zk rebalance.backoff.ms",
    "rebalance_max_retries": "zk rebalance.max.retries",
}


class Sweep(_Model):
    axis: str
    values: list[int] = Field(min_length=1)

    @field_validator("axis")
    @classmethod
    def _known_axis(cls, axis: str) -> str:
        if axis not in SWEEP_AXES:
            raise ValueError(f"unknown sweep axis {axis!r}: use one of {', '.join(SWEEP_AXES)}")
        return axis

    @field_validator("values")
    @classmethod
    def _distinct(cls, values: list[int]) -> list[int]:
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"{', '.join(map(str, repeated))} listed more than once: list each value once")
        return values


class Scenario(_Model):
    """One experiment, run on each of ``designs``; ``scenario.expand_cases`` expands the sweep and repeats into runs."""

    name: Annotated[str, AfterValidator(_slug)]
    description: str = Field(min_length=1)
    # `eager` is the coordinator design by its protocol's name (designs.py): stored as "coordinator".
    designs: list[Annotated[Literal["zk", "original", "coordinator", "eager", "cooperative", "consumer",
                                    "consumer-java"],
                            AfterValidator(canonical)]] = Field(default_factory=lambda: list(DEFAULT_DESIGNS),
                                                                min_length=1)
    duration: float = Field(gt=0, le=3600, description="seconds observed after t=0")
    repeats: int = Field(1, ge=1, le=100)
    seed: int = Field(0, ge=0)
    settle_timeout: float = Field(30.0, gt=0, le=600)
    # The initial group's own bound (each of its waves, runs/case_run.py): None is settle_timeout. Starting many members
    # takes longer than any change they then make, and longer still on a busy machine.
    start_timeout: float | None = Field(None, gt=0, le=3600)
    zk_servers: int = Field(1, ge=1, le=9)
    group: Group
    # Kafka 0.8 consumer properties (dotted keys), checked with ConsumerConfig by the rules.
    zk: dict[str, Any] = Field(default_factory=dict)
    coordinator: CoordinatorSettings = CoordinatorSettings()
    load: Load = Load()
    network: list[NetworkRule] = Field(default_factory=list)
    churn: list[ChurnAction] = Field(default_factory=list)
    sweep: Sweep | None = None

    @model_validator(mode="before")
    @classmethod
    def _flatten_zk(cls, data: Any) -> Any:
        # An unquoted `zookeeper.session.timeout.ms = 6000` in [zk] is a nested table in TOML: undo that.
        if isinstance(data, dict) and isinstance(data.get("zk"), dict):
            data = {**data, "zk": flatten(data["zk"])}
        return data

    @property
    def summary(self) -> str:
        """The first line of the description."""
        return self.description.strip().splitlines()[0].strip()

    @property
    def case_count(self) -> int:
        return (len(self.sweep.values) if self.sweep else 1) * self.repeats

    @property
    def estimated_runs(self) -> int:
        """Cases times designs: every case runs once on each design."""
        return self.case_count * len(self.designs)

    @property
    def audits_delivery(self) -> bool:
        """A scenario with a load audits delivery (every produced offset against what members consumed)."""
        return self.load.rate > 0

    @property
    def coordinator_commit_interval_ms(self) -> int:
        """The coordinator design's auto-commit interval: its own setting, else the ZooKeeper design's."""
        if self.coordinator.auto_commit_interval_ms is not None:
            return self.coordinator.auto_commit_interval_ms
        return self.zk_config("lab", "127.0.0.1:2181").auto_commit_interval_ms

    @property
    def coordinator_auto_commit(self) -> bool:
        """Whether coordinator members auto-commit: as the ZooKeeper design's auto.commit.enable says."""
        return self.zk_config("lab", "127.0.0.1:2181").auto_commit_enable

    def spread_s(self, action: _Action) -> float:
        """An action's spread in seconds ("heartbeat": the coordinator's heartbeat interval)."""
        if action.spread == HEARTBEAT:
            return self.coordinator.heartbeat_interval_ms / 1000
        return float(action.spread)

    def zk_config(self, group_id: str, zookeeper_connect: str, consumer_id: str | None = None) -> ConsumerConfig:
        """The ZooKeeper design's ``ConsumerConfig`` for one member of one run."""
        props: dict[str, object] = {**self.zk, "group.id": group_id, "zookeeper.connect": zookeeper_connect}
        if consumer_id is not None:
            props["consumer.id"] = consumer_id
        return ConsumerConfig.from_properties(props)


def flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@dataclass(frozen=True)
class Step:
    """One churn action resolved for one case.

    ``members`` are the concrete members acted on (the new indices for ``join``); it is empty for actions on
    no member (``add_partitions``, ``kill_zk_leader``) and for a ``delay`` on ``all`` members, which also
    covers members that join later.
    """

    index: int  # position in the scenario's churn list
    at: float  # when it runs: the action's `at` plus `offset`
    action: Join | Leave | Kill | Pause | Expire | Restart | AddPartitions | KillZkLeader | Delay | Migrate
    members: tuple[int, ...] = ()
    offset: float = 0.0  # drawn from the action's spread with the case's seed (0 without one)

    @property
    def kind(self) -> str:
        return self.action.action


@dataclass(frozen=True)
class Case:
    """One concrete run: the scenario with its sweep value applied, one repeat, its own seed.

    The same case (id and seed) is run on every design, so the designs are compared on identical schedules.
    """

    case_id: str
    scenario: Scenario  # sweep value applied, sweep removed
    repeat: int
    seed: int
    sweep_axis: str | None
    sweep_value: int | None
    steps: tuple[Step, ...]

    @property
    def designs(self) -> list[str]:
        return list(self.scenario.designs)

