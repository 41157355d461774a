"""The console producer, as `kafka-console-producer` without a terminal: lines in, one message each.

A line `key<TAB>value` is a keyed message; any other line is a value without a key. The producer must find its
topic already made: with auto-creation off (as on the embedded cluster) a send to a missing topic would wait for
metadata and then lose the message, so one Metadata request first tells.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.admin import AdminError, existing_topics


@dataclass
class Produced:
    """What one `produce` call wrote: messages handed to the producer, and the errors of those not written."""

    sent: int = 0
    failed: list[Exception] = field(default_factory=list)


def generated_lines(count: int, key_prefix: str, keys: int) -> Iterator[str]:
    """`count` keyed lines, `<prefix>-<i mod keys>` TAB `message-<i>`."""
    return (f"{key_prefix}-{i % keys}\tmessage-{i}" for i in range(count))


def open_producer(bootstrap: str, topic: str) -> Any:  # a kafka.KafkaProducer
    """A producer for `topic`, which must exist on the brokers at `bootstrap`."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    if topic not in existing_topics(bootstrap):
        raise AdminError(f"topic {topic!r} does not exist on {bootstrap}: create it with `zkconsumer topic create`")
    try:
        return KafkaProducer(bootstrap_servers=bootstrap.split(","), linger_ms=5, acks=1, enable_idempotence=False)
    except KafkaError as exc:
        raise AdminError(f"cannot reach a broker at {bootstrap} ({exc}): check --bootstrap") from None


def produce(bootstrap: str, topic: str, lines: Iterable[str]) -> Produced:
    """Send one message per line to `topic`, wait until every send is answered, and close the producer."""
    producer = open_producer(bootstrap, topic)
    produced = Produced()
    try:
        for line in lines:
            key, sep, value = line.partition("\t")
            future = producer.send(topic, key=key.encode() if sep else None, value=(value if sep else line).encode())
            future.add_errback(produced.failed.append)
            produced.sent += 1
        producer.flush()
    finally:
        producer.close()
    return produced
