"""Test helpers: bounded waits, a timeout-bounded kazoo probe, and a real server-side session expiry."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer.config import ConsumerConfig
from zkconsumer.zookeeper.client import ZkClient

T = TypeVar("T")
CALL_TIMEOUT = 10.0
# kazoo's default reconnect backoff grows to an hour; tests want to notice a recovered server at once.
TEST_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 0.5}


def wait_for(condition: Callable[[], T], timeout: float = 20.0, interval: float = 0.05, message: str = "") -> T:
    """Poll `condition` until it returns something truthy; fail with `message` (and the last value) on timeout."""
    deadline = time.monotonic() + timeout
    last: T = condition()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message or condition}; last={last!r}")
        time.sleep(interval)
        last = condition()
    return last


def beyond_the_textbook(events: list[dict], members: int, partitions: int, notified: int, attempt_cost: int,
                        per_notification: int = 1) -> int:
    """ZooKeeper requests a join's conflicts added to its closed form (docs/join-cost.md), from the members' events:
    in the textbook case each member makes one attempt (`attempt_cost` requests), the group releases and claims each
    partition once (a claim: offset read + create), no claim fails (a failed one also reads the taken node), nothing
    is rolled back, and each member but the joiner is notified once (`per_notification` requests each)."""
    kinds: dict[str, int] = {}
    for event in events:
        kinds[event["kind"]] = kinds.get(event["kind"], 0) + 1
    ok_claims = sum(1 for e in events if e["kind"] == "claim" and e["ok"])
    failed_claims = kinds.get("claim", 0) - ok_claims
    return ((kinds.get("attempt_begin", 0) - members) * attempt_cost + (kinds.get("release", 0) - partitions)
            + 2 * (ok_claims - partitions) + 3 * failed_claims + kinds.get("rollback", 0)
            + per_notification * (notified - (members - 1)))


def conflicted(events: list[dict]) -> bool:
    """Whether a join met a conflict: a claim found the node taken, or an attempt ended in a conflict."""
    return any((e["kind"] == "claim" and not e["ok"]) or (e["kind"] == "attempt_end" and e.get("result") == "conflict")
               for e in events)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_config(zk_connect: str, group: str, consumer: str | None, **overrides) -> ConsumerConfig:
    """A test member's config: short session and backoff, manual commits; `foo_bar=1` overrides `foo.bar`."""
    props = {
        "group.id": group, "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 4000,
        "rebalance.backoff.ms": 300, "rebalance.max.retries": 20, "auto.commit.enable": False,
        "auto.offset.reset": "smallest", "refresh.leader.backoff.ms": 100,
    }
    if consumer:
        props["consumer.id"] = consumer
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return ConsumerConfig.from_properties(props)


class ZkProbe:
    """A kazoo client for assertions: every call is bounded (a synchronous call while SUSPENDED can hang)."""

    def __init__(self, hosts: str, session_timeout: float = 10.0, client_id: tuple[int, bytes] | None = None):
        self.client = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=dict(TEST_CONNECTION_RETRY),
                                  client_id=client_id)
        self.client.start(timeout=CALL_TIMEOUT)
        self._zk_client: ZkClient | None = None
        self.hosts = hosts

    @property
    def zk_client(self) -> ZkClient:
        """This probe's location as a project `ZkClient` (for library readers such as `read_group_snapshot`)."""
        if self._zk_client is None:
            self._zk_client = ZkClient(self.hosts, session_timeout_ms=10000, log_id="probe").start()
        return self._zk_client

    def get(self, path: str) -> bytes | None:
        try:
            return self.client.get_async(path).get(timeout=CALL_TIMEOUT)[0]
        except NoNodeError:
            return None

    def stat(self, path: str):
        return self.client.exists_async(path).get(timeout=CALL_TIMEOUT)

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children_async(path).get(timeout=CALL_TIMEOUT))
        except NoNodeError:
            return []

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def text(self, path: str) -> str | None:
        data = self.get(path)
        return None if data is None else data.decode()

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        """(topic, partition) -> owner thread id, as stored under /consumers/<g>/owners."""
        result = {}
        base = f"/consumers/{group}/owners"
        for topic in self.children(base):
            for partition in self.children(f"{base}/{topic}"):
                value = self.text(f"{base}/{topic}/{partition}")
                if value is not None:
                    result[(topic, int(partition))] = value
        return result

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> None:
        self.client.create_async(path, data, ephemeral=ephemeral, makepath=True).get(timeout=CALL_TIMEOUT)

    def set(self, path: str, data: bytes) -> None:
        self.client.set_async(path, data).get(timeout=CALL_TIMEOUT)

    def delete(self, path: str) -> None:
        self.client.delete_async(path).get(timeout=CALL_TIMEOUT)

    def close(self) -> None:
        if self._zk_client is not None:
            self._zk_client.close()
        self.client.stop()
        self.client.close()


def expire_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Force a *real* server-side expiry: a second client joins the session and closes it.

    kazoo's own `expire_session()` only simulates expiry inside the client; the server would keep the
    session and its ephemeral nodes until the timeout.
    """
    intruder = KazooClient(hosts=hosts, client_id=client_id, connection_retry=dict(TEST_CONNECTION_RETRY))
    intruder.start(timeout=CALL_TIMEOUT)
    intruder.stop()
    intruder.close()


class EventRecorder:
    """A member's rebalance events, kept for assertions: subscribe it to a connector or an EventBus (the events
    arrive on the member's threads, hence the lock)."""

    def __init__(self) -> None:
        self.events: list = []
        self.lock = threading.Lock()

    def __call__(self, event) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: str) -> list:
        with self.lock:
            return [e for e in self.events if e.kind == kind]


def mode_overrides(mode: str, **extra) -> dict:
    """`make_config` keyword overrides for an opt-in mode's properties (zkconsumer/modes.py) and `extra` ones."""
    from zkconsumer.modes import mode_properties

    return {key.replace(".", "_"): value for key, value in {**mode_properties(mode), **extra}.items()}
