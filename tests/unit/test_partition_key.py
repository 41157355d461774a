"""How events name a partition, both ways (rebalance/events.py): the JVM drivers' JSON keys are read with the same
rule the product writes them with."""

from __future__ import annotations

import pytest

from rebalance.events import format_partition_key, parse_partition_key


@pytest.mark.parametrize(("topic", "partition"), [("t", 0), ("a.b-c_d", 12), ("__consumer_offsets", 49)])
def test_a_partition_key_reads_back_as_it_was_written(topic: str, partition: int) -> None:
    key = format_partition_key(topic, partition)
    assert key == f"{topic}/{partition}"
    assert parse_partition_key(key) == (topic, partition)


def test_a_key_without_a_partition_number_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_partition_key("topic/")
