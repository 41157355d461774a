"""Where things live in ZooKeeper (Kafka 0.8.2 `ZkUtils`, `ZKGroupDirs`, `ZKGroupTopicDirs`).

Owners and offsets are keyed by the bare partition number, as the code (not the old docs) does.
"""

from __future__ import annotations

CONSUMERS = "/consumers"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"


def group_dir(group: str) -> str:
    return f"{CONSUMERS}/{group}"


def ids_dir(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def registration_path(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def owners_dir(group: str, topic: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/owners"
    return base if topic is None else f"{base}/{topic}"


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def offsets_dir(group: str, topic: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/offsets"
    return base if topic is None else f"{base}/{topic}"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def barrier_dir(group: str, view: str) -> str:
    """The consensus barrier's acknowledgements of one view (named by its `View.id`; an opt-in mode, docs/modes.md);
    0.8.2 never reads it."""
    return f"{CONSUMERS}/{group}/zkconsumer-barrier/{view}"


def barrier_ack_path(group: str, view: str, consumer_id: str) -> str:
    return f"{barrier_dir(group, view)}/{consumer_id}"


def assignment_dir(group: str) -> str:
    """The sticky assignor's records, one per view (an opt-in mode, docs/modes.md); its own data holds the latest
    record written, a hint for members that have none. 0.8.2 never reads it."""
    return f"{CONSUMERS}/{group}/zkconsumer-assignment"


def assignment_path(group: str, view: str) -> str:
    return f"{assignment_dir(group)}/{view}"
