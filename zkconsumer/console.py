"""The console consumer (`zkconsumer consume`): its configuration from a file and the command line, and its loop,
one named thread per stream, each printing what its iterator hands out.

Printing happens in the thread that took the message from the iterator, so "handed out" (which is what the
connector commits) and "printed" differ by at most the message being printed. A message taken after
--max-messages was reached is rewound before the final commit, so nothing is skipped.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from fetcher_manager.stream import ConsumerTimeoutError, KafkaStream
from rebalance.subscription import Blacklist, TopicFilter, Whitelist
from zkconsumer.config import ConsumerConfig, read_properties_file
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.event_log import EventFileWriter


def console_config(properties_file: Path | None, zookeeper: str | None, resolve_zookeeper: Callable[[str | None], str],
                   *, group: str | None = None, from_beginning: bool = False, timeout_ms: int | None = None,
                   consumer_id: str | None = None, overrides: dict[str, str] | None = None) -> ConsumerConfig:
    """The console consumer's configuration: the file's keys, then the command line's, validated once.

    `resolve_zookeeper(zookeeper)` is asked only when the command line names a ZooKeeper or the file has none."""
    # The file's keys first, unvalidated: what it lacks (group.id, zookeeper.connect) may come from the
    # command line, and the whole is validated once below.
    props: dict[str, object] = dict(read_properties_file(properties_file)) if properties_file else {}
    if zookeeper or "zookeeper.connect" not in props:
        props["zookeeper.connect"] = resolve_zookeeper(zookeeper)
    props["group.id"] = group or props.get("group.id") or f"console-consumer-{uuid.uuid4().int % 100000}"
    if from_beginning:
        props["auto.offset.reset"] = "smallest"
    if timeout_ms is not None:
        props["consumer.timeout.ms"] = timeout_ms
    if consumer_id:
        props["consumer.id"] = consumer_id
    props.update(overrides or {})
    return ConsumerConfig.from_properties(props)


def topic_filter(whitelist: str | None, blacklist: str | None) -> TopicFilter:
    """`--whitelist` or `--blacklist` as the connector's filter."""
    return Whitelist(whitelist) if whitelist is not None else Blacklist(blacklist or "")


def _decode(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def consume(config: ConsumerConfig, topics: str | TopicFilter, streams: int, emit: Callable[[object], None],
            max_messages: int | None = None, throttle_ms: int = 0, events_path: Path | None = None) -> int:
    """Join the group, hand every message of `topics` (a topic, or a filter) to `emit` until `max_messages`, the
    consumer's timeout, SIGTERM or Ctrl-C, then leave; returns how many were handed out. With `events_path`, the
    member's events are appended there as JSON lines."""
    writer = EventFileWriter(events_path) if events_path is not None else None
    try:
        with ZookeeperConsumerConnector(config) as connector:
            if writer is not None:
                connector.add_event_listener(writer)
            if isinstance(topics, str):
                stream_list = connector.create_message_streams({topics: streams}, _decode, _decode)[topics]
            else:
                stream_list = connector.create_message_streams_by_filter(topics, streams, _decode, _decode)
            return run_console(connector, stream_list, emit, max_messages, throttle_ms)
    finally:
        if writer is not None:
            writer.close()


def run_console(connector: ZookeeperConsumerConnector, streams: list[KafkaStream], emit: Callable[[object], None],
                max_messages: int | None = None, throttle_ms: int = 0) -> int:
    lock = threading.Lock()
    done = threading.Event()
    count = [0]

    def drain(stream: KafkaStream) -> None:
        try:
            for message in stream:
                with lock:
                    if done.is_set():
                        _rewind(connector, [message])
                        return
                    emit(message)
                    count[0] += 1
                    if max_messages is not None and count[0] >= max_messages:
                        done.set()
                        return
                if throttle_ms:
                    time.sleep(throttle_ms / 1000.0)  # simulated processing time (labs and tests)
        except ConsumerTimeoutError:
            pass

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    workers = [threading.Thread(target=drain, args=(s,), name=f"{connector.consumer_id}-console-{i}", daemon=True)
               for i, s in enumerate(streams)]
    for worker in workers:
        worker.start()
    try:
        while any(w.is_alive() for w in workers) and not done.is_set():
            done.wait(0.2)
    except KeyboardInterrupt:
        done.set()
    finally:
        # Iterators blocked on an empty queue end when shutdown puts the sentinel; others see `done`.
        for worker in workers:
            worker.join(timeout=0.5)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return count[0]


def _rewind(connector: ZookeeperConsumerConnector, unprinted: list) -> None:
    """Set each partition's consumed offset back to its first message that was handed out but not printed."""
    first: dict[tuple[str, int], int] = {}
    for message in unprinted:
        key = (message.topic, message.partition)
        first[key] = min(first.get(key, message.offset), message.offset)
    for info in connector.ownership.infos():
        offset = first.get((info.topic, info.partition))
        if offset is not None and offset < info.consumed_offset:
            info.set_consumed_offset(offset)
