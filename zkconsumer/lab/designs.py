"""The designs the lab compares, named once: four generations of group rebalancing.

    "zk"           0.8 (2013): the ZooKeeper design, members running this project's connector
    "original"     the same design, members running Kafka 0.8.2.2's own ZookeeperConsumerConnector
                   (docs/interop.md): the reference ours is measured against, on the same servers and proxies
    "coordinator"  0.9 (2015): the broker-side GroupCoordinator with the classic protocol and an eager assignor
                   (JoinGroup/SyncGroup, every member revokes everything), members running kafka-python's
                   KafkaConsumer; `eager` is the same design by its protocol's name
    "cooperative"  2.4 (2019, KIP-429): the classic protocol with `cooperative-sticky`, members running librdkafka
                   (confluent-kafka): only the partitions that move are revoked, in a second generation
    "consumer"     4.0 (2025, KIP-848): the consumer group protocol, members running librdkafka with
                   `group.protocol=consumer`: the broker computes the assignment and hands it out in heartbeats
    "consumer-java"  the same protocol, members running Kafka's own Java consumer (kafka-clients 4.x), its reference
                   client (docs/interop.md): a JVM per member, so it needs a JDK

"zk" and "original" are the same protocol (the znodes, watches and owner claims of docs/DESIGN.md), so
everything that reads the ZooKeeper design's wire traffic, owner nodes or registrations applies to both:
ask `is_zookeeper_design`, never compare with "zk". Likewise "consumer" and "consumer-java" are one protocol:
ask `is_consumer_protocol`. The other four are broker-side designs (`is_broker_side`):
their members know nothing of ZooKeeper, and the analysis treats them alike through their members' `generation`
records and the Kafka proxy's counts.

Where each runs (`broker_kind`): the ZooKeeper designs need Apache Kafka 3.9 in ZooKeeper mode (Kafka 4 refuses the
0.8 fetcher's Fetch v0, KIP-896) and so does the eager design, which the lab has always measured there; the
cooperative and consumer-protocol designs run on Apache Kafka 4.x in KRaft mode, the broker their users run today (the
consumer protocol exists only there).

Only "zk" runs the opt-in modes (zkconsumer/modes.py, docs/modes.md): a run of another mode is labelled
`zk+MODE` (its run directory, its summary row, its report rows), the faithful mode's runs keep the bare design.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from zkconsumer.errors import InputError

DESIGNS: tuple[str, ...] = ("zk", "original", "coordinator", "cooperative", "consumer", "consumer-java")
ZOOKEEPER_DESIGNS: tuple[str, ...] = ("zk", "original")
BROKER_SIDE_DESIGNS: tuple[str, ...] = ("coordinator", "cooperative", "consumer", "consumer-java")
# The designs of the consumer group protocol (KIP-848), whichever client their members run.
CONSUMER_PROTOCOL_DESIGNS: tuple[str, ...] = ("consumer", "consumer-java")
# Other names a user may give a design (`--design eager`): the protocol's own name for today's coordinator design.
ALIASES: dict[str, str] = {"eager": "coordinator"}
# What a scenario runs when its file names no designs: this project against the coordinator. The original needs a
# JDK and a JVM per member, so a scenario (or `lab run --design`) asks for it by name.
DEFAULT_DESIGNS: tuple[str, ...] = ("zk", "coordinator")
# Column headings for people (tables, the report, the lesson page).
LABELS: dict[str, str] = {
    "zk": "ZooKeeper (zkconsumer)",
    "original": "ZooKeeper (original 0.8.2.2)",
    "coordinator": "Classic eager (GroupCoordinator)",
    "cooperative": "Cooperative-sticky (KIP-429)",
    "consumer": "Consumer protocol (KIP-848)",
    "consumer-java": "Consumer protocol (KIP-848, Kafka's Java client)",
}
# Which broker a design's members talk to (see the module docstring).
BrokerKind = Literal["zookeeper", "kraft"]
KRAFT_DESIGNS: tuple[str, ...] = ("cooperative", "consumer", "consumer-java")
# The Python package a design's members need beyond the base install, with what to install.
_CLIENT_PACKAGES: dict[str, tuple[str, str]] = {
    "cooperative": ("confluent_kafka", "confluent-kafka"),
    "consumer": ("confluent_kafka", "confluent-kafka"),
}
# The designs whose members are JVMs built here from the project's Java sources: they need a JDK (java and javac).
_JDK_DESIGNS: tuple[str, ...] = ("consumer-java",)


# The design whose members take a mode's properties: the original's are Kafka's own and the coordinator's are
# kafka-python's, neither of which knows the `zkconsumer.*` keys.
MODE_DESIGN = "zk"
FAITHFUL = "faithful"  # the key of MODES that sets no property: Kafka 0.8.2's behaviour


def design_label(design: str, mode: str = FAITHFUL) -> str:
    """`zk`, or `zk+incremental` for a mode's run: the run directory's name and the label every table shows."""
    return design if mode == FAITHFUL else f"{design}+{mode}"


def is_zookeeper_design(design: str) -> bool:
    return design in ZOOKEEPER_DESIGNS


def is_broker_side(design: str) -> bool:
    """A design whose group is balanced by the broker (eager, cooperative, consumer protocol)."""
    return design in BROKER_SIDE_DESIGNS


def is_consumer_protocol(design: str) -> bool:
    """A design of the consumer group protocol (KIP-848): librdkafka's members or the Java client's."""
    return design in CONSUMER_PROTOCOL_DESIGNS


def broker_kind(design: str) -> BrokerKind:
    return "kraft" if design in KRAFT_DESIGNS else "zookeeper"


def missing_client(design: str) -> str | None:
    """Why this machine cannot run `design`'s members (one line naming the fix), or None if it can."""
    if design in _JDK_DESIGNS:
        return _missing_jdk(design)
    needed = _CLIENT_PACKAGES.get(design)
    if needed is None or importlib.util.find_spec(needed[0]) is not None:
        return None
    return (f"the {design} design's members run {needed[1]}, which is not installed: pip install {needed[1]} "
            "(or install zkconsumer with its lab dependencies)")


def _missing_jdk(design: str) -> str | None:
    # Imported here: the JVM tooling is for the few designs that need it, not for every reader of design names.
    from zkconsumer.embedded.process import EmbeddedError, java_executable
    from zkconsumer.interop.java_consumer import javac_executable
    from zkconsumer.interop.original import InteropError

    try:
        # javac first: a JRE alone has java, and javac's message names the JDK to install.
        javac_executable()
        java_executable()
    except (InteropError, EmbeddedError) as exc:
        return f"the {design} design's members run Kafka's Java consumer, which needs a JDK: {exc}"
    return None


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def select_designs(scenario_designs: list[str], choice: str) -> list[str]:
    """`--design`: `both` = the scenario's designs among zk and coordinator (the default); `all` = every design the
    scenario runs that this machine can run; one name (or a comma list) = those designs if the scenario runs them.

    The original runs wherever the scenario runs the ZooKeeper design, listed or not (scenarios leave it out by
    default only because it needs a JDK), and the cooperative and both consumer-protocol designs wherever it runs
    the coordinator design: a scenario written for "the broker-side design" holds for each of its generations."""
    runs = {canonical(d) for d in scenario_designs}
    if "zk" in runs:
        runs.add("original")
    if "coordinator" in runs:
        runs.update(KRAFT_DESIGNS)
    wanted = {"both": {"zk", "coordinator"},
              "all": {d for d in DESIGNS if missing_client(d) is None}}.get(choice)
    if wanted is None:
        wanted = {canonical(d.strip()) for d in choice.split(",") if d.strip()}
        unknown = sorted(wanted - set(DESIGNS))
        if unknown or not wanted:
            raise InputError(f"--design {choice!r}: {', '.join(unknown) or 'no design'} is not one of "
                             f"{', '.join(DESIGNS)}, {', '.join(ALIASES)}, both, all (or a comma list of designs)")
        for design in sorted(wanted):
            reason = missing_client(design)
            if reason is not None:
                raise InputError(f"--design {design}: {reason}")
    return [d for d in DESIGNS if d in runs and d in wanted]
