"""The console consumer loop: one named thread per stream, each printing what its iterator hands out.

Printing happens in the thread that took the message from the iterator, so "handed out" (which is what the
connector commits) and "printed" differ by at most the message being printed. A message taken after
--max-messages was reached is rewound before the final commit, so nothing is skipped.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

from fetcher_manager.stream import ConsumerTimeoutError, KafkaStream
from zkconsumer.connector import ZookeeperConsumerConnector


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
