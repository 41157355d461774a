"""The one spelling of "one partition of one topic" for the whole project (Kafka's ``TopicAndPartition``).

It lives here, at the bottom of the import graph, so that rebalance/ and the connector can use the same
class the fetchers key their maps by. A NamedTuple rather than a dataclass: it stays equal to, hashes like
and unpacks like the plain ``(topic, partition)`` tuple, so a map keyed by one is found by the other.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of one topic; ordered by ``(topic, partition)``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        # TopicAndPartition.toString in Kafka 0.8.2 (TopicAndPartition.scala); the 0.8.2 roundrobin assignor
        # (PartitionAssignor.scala) sorts partitions by the hashCode of exactly this text.
        return f"[{self.topic},{self.partition}]"
