"""The designs the lab compares, named once.

    "zk"           the ZooKeeper design, members running this project's connector
    "original"     the ZooKeeper design, members running Kafka 0.8.2.2's own ZookeeperConsumerConnector
                   (docs/interop.md): the reference ours is measured against, on the same servers and proxies
    "coordinator"  the broker-side GroupCoordinator design, members running kafka-python's KafkaConsumer

"zk" and "original" are the same protocol (the znodes, watches and owner claims of docs/zk-design.md), so
everything that reads the ZooKeeper design's wire traffic, owner nodes or registrations applies to both:
ask `is_zookeeper_design`, never compare with "zk".

Only "zk" runs the opt-in modes (zkconsumer/modes.py, docs/modes.md): a run of another mode is labelled
`zk+MODE` (its run directory, its summary row, its report rows), the faithful mode's runs keep the bare design.
"""

from __future__ import annotations

from zkconsumer.errors import InputError

DESIGNS: tuple[str, ...] = ("zk", "original", "coordinator")
ZOOKEEPER_DESIGNS: tuple[str, ...] = ("zk", "original")
# What a scenario runs when its file names no designs: this project against the coordinator. The original needs a
# JDK and a JVM per member, so a scenario (or `lab run --design`) asks for it by name.
DEFAULT_DESIGNS: tuple[str, ...] = ("zk", "coordinator")
# Column headings for people (tables, the report, the lesson page).
LABELS: dict[str, str] = {
    "zk": "ZooKeeper (zkconsumer)",
    "original": "ZooKeeper (original 0.8.2.2)",
    "coordinator": "GroupCoordinator",
}


# The design whose members take a mode's properties: the original's are Kafka's own and the coordinator's are
# kafka-python's, neither of which knows the `zkconsumer.*` keys.
MODE_DESIGN = "zk"
FAITHFUL = "faithful"  # the key of MODES that sets no property: Kafka 0.8.2's behaviour


def design_label(design: str, mode: str = FAITHFUL) -> str:
    """`zk`, or `zk+incremental` for a mode's run: the run directory's name and the label every table shows."""
    return design if mode == FAITHFUL else f"{design}+{mode}"


def is_zookeeper_design(design: str) -> bool:
    return design in ZOOKEEPER_DESIGNS


def select_designs(scenario_designs: list[str], choice: str) -> list[str]:
    """`--design`: `both` = the scenario's designs among zk and coordinator (the default); `all` = those and the
    original; one name = that design if the scenario runs it. The original runs wherever the scenario runs the
    ZooKeeper design, listed or not: scenarios leave it out by default only because it needs a JDK."""
    runs = set(scenario_designs) | ({"original"} if "zk" in scenario_designs else set())
    wanted = {"both": {"zk", "coordinator"}, "all": set(DESIGNS)}.get(choice)
    if wanted is None:
        wanted = {d.strip() for d in choice.split(",") if d.strip()}
        unknown = sorted(wanted - set(DESIGNS))
        if unknown or not wanted:
            raise InputError(f"--design {choice!r}: {', '.join(unknown) or 'no design'} is not one of "
                             f"{', '.join(DESIGNS)}, both, all (or a comma list of designs)")
    return [d for d in DESIGNS if d in runs and d in wanted]
