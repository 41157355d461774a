"""FetchSettings holds only what the fetcher side reads, and one factory turns it into a KafkaWire."""

from __future__ import annotations

import threading
from dataclasses import fields

import pytest
from fetch_helpers import broker_of, create_topic, settings
from helpers import wait_for

from fetcher_manager.chunks import ChunkQueue
from fetcher_manager.kafka_wire import KafkaWire
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.settings import FetchSettings
from zkconsumer.embedded.kafka import KafkaBroker


def test_fetch_settings_fields() -> None:
    assert {f.name for f in fields(FetchSettings)} == {
        "client_id", "consumer_id", "fetch_message_max_bytes", "fetch_min_bytes", "fetch_wait_max_ms",
        "num_consumer_fetchers", "refresh_leader_backoff_ms", "socket_timeout_ms", "socket_receive_buffer_bytes",
        "auto_offset_reset"}
    with pytest.raises(TypeError):
        FetchSettings(client_id="c", consumer_id="c_1", consumer_timeout_ms=100)  # type: ignore[call-arg]


def test_from_settings_uses_the_socket_settings() -> None:
    s = FetchSettings(client_id="cid", consumer_id="c_1", socket_timeout_ms=1234, socket_receive_buffer_bytes=4096)
    wire = KafkaWire.from_settings(s)
    assert (wire._client_id, wire._timeout_s, wire._receive_buffer_bytes) == ("cid", 1.234, 4096)

    class Subclass(KafkaWire):
        pass

    assert type(Subclass.from_settings(s)) is Subclass


@pytest.mark.slow
def test_finder_and_fetchers_get_their_wires_from_the_one_factory(kafka: KafkaBroker,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []  # the name of the thread that asked for each wire
    original = KafkaWire.from_settings.__func__  # type: ignore[attr-defined]

    def spy(cls: type[KafkaWire], s: FetchSettings) -> KafkaWire:
        built.append(threading.current_thread().name)
        return original(cls, s)

    monkeypatch.setattr(KafkaWire, "from_settings", classmethod(spy))
    topic = create_topic(kafka.bootstrap, 1)
    s = settings()
    manager = ConsumerFetcherManager(s, lambda: [broker_of(kafka)])
    try:
        manager.start_connections([PartitionTopicInfo(topic, 0, ChunkQueue(1), -1, -1)])
        wait_for(lambda: len(manager.fetching()) == 1, 10, message="the partition fetched")
    finally:
        manager.shutdown()
        assert manager.join(5)
    # one for the leader finder (built where start_connections runs), one for the fetcher it started
    assert built == [threading.current_thread().name, f"{s.consumer_id}-leader-finder-thread"]
