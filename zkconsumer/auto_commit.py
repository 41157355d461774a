"""`AutoCommitter`: commits the owned partitions' consumed offsets every `auto.commit.interval.ms`.

Kafka 0.8.2 keeps this apart from the connector too: ZookeeperConsumerConnector.scala schedules `autoCommit` on a
`KafkaScheduler` task named "kafka-consumer-autocommit", first one interval after startup (`delay =
autoCommitIntervalMs`), then every interval; its shutdown stops the scheduler before the final commit. Here the
task is one thread of its own, named `<consumer id>-auto-commit` (docs/DESIGN.md, "Threads and locks").
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rebalance.sync import THREADING, Lock, SyncPrimitives
from zkconsumer.zookeeper.client import ZkUnavailableError

# The connector's logger: these lines were the connector's, and the log prints the logger's name (the CLI's format
# in zkconsumer/cli.py), so they keep it.
log = logging.getLogger("zkconsumer.connector")


class AutoCommitter:
    """One thread, `<consumer id>-auto-commit`, that calls `commit` every `interval_ms`.

    States::

        created ──start()──▶ running ──stop()──▶ stopping ──its wait or its commit returns──▶ ended

    `stop()` may come in any state; once it has returned no new commit begins (one in progress finishes), and
    `join()` says whether the thread has ended.

    The lock rule: every commit runs under `lock` (the listener's rebalance lock), so it never writes a partition
    that a concurrent rebalance just released; `commit` takes the offsets' and the ownership's locks inside it.
    The thread waits for its next round holding no lock. A round whose ZooKeeper client is not connected is skipped
    without a word (the connection change was logged once, on kazoo's thread). A commit that was waiting for the
    lock when `stop()` came does not run: the connector's shutdown, which holds that lock, makes the final commit.
    """

    def __init__(self, consumer_id: str, interval_ms: int, commit: Callable[[], object], *, lock: Lock,
                 connected: Callable[[], bool], sync: SyncPrimitives = THREADING) -> None:
        self.consumer_id = consumer_id
        self.interval_s = interval_ms / 1000.0
        self.name = f"{consumer_id}-auto-commit"
        self._commit = commit
        self._lock = lock
        self._connected = connected
        self._stopped = sync.event()
        self._thread = sync.thread(self._run, name=self.name)
        self._started = False

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end; it wakes at once from its wait between rounds. Does not wait for it (`join`)."""
        self._stopped.set()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` for the thread; True if it has ended (or never started)."""
        if self._started:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):  # first run one interval after start, then every interval
            if not self._connected():  # the state change was logged once; the next round tries again
                continue
            try:
                with self._lock:
                    if self._stopped.is_set():  # shutdown made the final commit while we waited for the lock
                        return
                    self._commit()
            except ZkUnavailableError as exc:
                log.warning("%s: auto-commit skipped: %s", self.consumer_id, exc)
            except Exception:
                log.exception("%s: exception during auto-commit", self.consumer_id)
