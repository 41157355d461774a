"""Incremental ownership's fetcher operations (docs/modes.md): a partition removed while the others keep being
fetched, one added to running fetchers, and a stop that wakes a fetcher waiting for room in a full queue."""

from __future__ import annotations

import threading

import pytest
from fetch_helpers import broker_of, create_topic, produce, settings
from helpers import wait_for

from fetcher_manager.chunks import ChunkQueue, FetchedDataChunk
from fetcher_manager.manager import ConsumerFetcherManager
from fetcher_manager.partition_info import PartitionTopicInfo
from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.embedded.kafka import KafkaBroker


@pytest.mark.slow
def test_a_removed_partition_stops_while_the_others_go_on_and_comes_back_when_added(kafka: KafkaBroker) -> None:
    topic = create_topic(kafka.bootstrap, 2)
    produce(kafka.bootstrap, topic, [(p, None, b"v") for p in (0, 1) for _ in range(3)])
    queue = ChunkQueue(100)
    infos = [PartitionTopicInfo(topic, p, queue, 0, 0) for p in (0, 1)]
    broker = broker_of(kafka)
    manager = ConsumerFetcherManager(settings(), lambda: [broker])
    try:
        manager.start_connections(infos)
        wait_for(lambda: all(i.fetched_offset == 3 for i in infos), 20, message="both partitions fetched")
        assert manager.remove_partitions([TopicPartition(topic, 0)], 10.0)
        assert set(manager.fetching()) == {TopicPartition(topic, 1)}
        produce(kafka.bootstrap, topic, [(p, None, b"w") for p in (0, 1) for _ in range(2)])
        wait_for(lambda: infos[1].fetched_offset == 5, 20, message="partition 1 still fetched")
        # The fetcher has answered at least once more since; partition 0 was not in it.
        assert infos[0].fetched_offset == 3
        assert queue.drop_partitions({TopicPartition(topic, 0)}) >= 1  # its chunks from before the removal
        manager.add_partitions([infos[0]])
        wait_for(lambda: infos[0].fetched_offset == 5, 20, message="partition 0 fetched again")
    finally:
        manager.shutdown()
        assert manager.join(10)


def test_a_stop_wakes_a_put_that_waits_for_room() -> None:
    queue = ChunkQueue(1)
    info = PartitionTopicInfo("t", 0, queue, 0, 0)

    assert queue.put(FetchedDataChunk(b"", 0, info, 0))
    stopping = threading.Event()
    checks: list[bool] = []  # what the waiting put saw each time it looked at its stop flag

    def interrupted() -> bool:
        checks.append(stopping.is_set())
        return checks[-1]

    returned: list[bool] = []
    putter = threading.Thread(target=lambda: returned.append(
        queue.put(FetchedDataChunk(b"", 0, info, 0), timeout=None, interrupted=interrupted)), name="putter")
    putter.start()
    # The put looks at the flag under the queue's lock and keeps it until it waits: a wake-up sent after the first
    # look reaches it waiting.
    wait_for(lambda: checks == [False], 10, message="the put to find the queue full and wait")
    queue.wake_putters()  # a wake-up with nothing to stop for: it looks again, and waits on
    wait_for(lambda: checks == [False, False], 10, message="the put to look at its flag again after the wake-up")
    assert putter.is_alive() and returned == []
    stopping.set()
    queue.wake_putters()
    putter.join(10)  # without the wake it would wait forever (timeout=None)
    assert not putter.is_alive() and returned == [False] and checks == [False, False, True]
    assert queue.qsize() == 1
