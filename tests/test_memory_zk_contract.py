"""The in-memory ZooKeeper against a real one: identical call sequences, equal results, equal `op_counts()`.

Each sequence runs once on a `ZkClient` connected to the suite's real ZooKeeper (a fresh chroot) and once on a
`MemoryZkClient`; the records (every step's result or exception, then the clients' counters since start) must
be equal. This is what lets counts measured on the in-memory store stand for counts on a real server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import expire_session, wait_for

from zkconsumer.zookeeper.client import ZkClient, ZkClosedError
from zkconsumer.zookeeper.memory import MemoryZkClient, MemoryZooKeeper

Client = Any  # ZkClient or MemoryZkClient: the same surface


@dataclass
class Backend:
    name: str
    make: Callable[[str], Client]
    expire: Callable[[Client], None]
    clients: dict[str, Client] = field(default_factory=dict)
    baselines: dict[str, dict[str, int]] = field(default_factory=dict)

    def client(self, label: str) -> Client:
        client = self.make(label)
        self.clients[label] = client
        # A real client in a chroot checks the chroot exists at start (one `exists`): compare from here on.
        self.baselines[label] = client.op_counts()
        return client

    def counts(self, label: str) -> dict[str, int]:
        now, base = self.clients[label].op_counts(), self.baselines[label]
        return {kind: n - base.get(kind, 0) for kind, n in sorted(now.items()) if n != base.get(kind, 0)}

    def owner_label(self, session_id: int) -> str | int:
        if session_id == 0:
            return 0
        labels = [label for label, c in self.clients.items() if c.session_id == session_id]
        return labels[0] if labels else "another session"

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


class Record:
    """Step results, normalised so that two backends can be compared (stats keep what must agree)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.steps: list[tuple[str, object]] = []

    def __call__(self, label: str, call: Callable[[], object]) -> None:
        try:
            value = self.normalise(call())
        except Exception as exc:
            value = f"raises {type(exc).__name__}"
        self.steps.append((label, value))

    def normalise(self, value: object) -> object:
        if isinstance(value, tuple) and len(value) == 2 and hasattr(value[1], "ephemeralOwner"):
            data, stat = value
            return data, {"version": stat.version, "cversion": stat.cversion, "aversion": stat.aversion,
                          "dataLength": stat.dataLength, "numChildren": stat.numChildren,
                          "owner": self.backend.owner_label(stat.ephemeralOwner)}
        return value

    def counts(self, label: str) -> None:
        self.steps.append((f"op_counts {label}", self.backend.counts(label)))


def sequence_requests(backend: Backend) -> list[tuple[str, object]]:
    r = Record(backend)
    zk = backend.client("zk")
    r("create with parents", lambda: zk.create("/s/a/b", b"x"))
    r("get null parent", lambda: zk.get("/s/a"))
    r("get leaf", lambda: zk.get("/s/a/b"))
    r("children", lambda: sorted(zk.get_children("/s/a") or []))
    r("children of missing", lambda: zk.get_children("/s/none"))
    r("exists", lambda: (zk.exists("/s/a"), zk.exists("/s/none")))
    r("ensure_path on existing", lambda: zk.ensure_path("/s/a"))
    r("ensure_path on missing", lambda: zk.ensure_path("/s/p/q"))
    r("get ensured", lambda: zk.get("/s/p/q"))
    r("set existing", lambda: zk.set("/s/a/b", b"y"))
    r("get after set", lambda: zk.get("/s/a/b"))
    r("set missing", lambda: zk.set("/s/c/d", b"1"))
    r("set empty", lambda: zk.set("/s/c/d", b""))
    r("get empty", lambda: zk.get("/s/c/d"))
    r("get parent of set", lambda: zk.get("/s/c"))
    r("create existing", lambda: zk.create("/s/a/b", b"z"))
    r("create without makepath", lambda: zk.create("/s/q/r", b"", makepath=False))
    r("create relative path", lambda: zk.create("s/rel", b"r"))
    r("get with trailing slash", lambda: zk.get("/s/rel/"))
    r("create with ..", lambda: zk.create("/s/../x", b""))
    r("create ephemeral", lambda: zk.create("/s/e", b"1", ephemeral=True))
    r("child of ephemeral", lambda: zk.create("/s/e/c", b""))
    r("owners", lambda: (backend.owner_label(zk.ephemeral_owner("/s/e")), zk.ephemeral_owner("/s/a"),
                         zk.ephemeral_owner("/s/none")))
    r("delete non-empty", lambda: zk.delete("/s/a"))
    r("delete leaf", lambda: zk.delete("/s/a/b"))
    r("delete recursive", lambda: zk.delete("/s", recursive=True))
    r("delete missing", lambda: zk.delete("/s"))
    r.counts("zk")
    zk.close()
    r("get after close", lambda: zk.get("/s"))
    r("connected after close", lambda: (zk.connected, zk.closed, zk.session_credentials))
    r("watch_children after close", lambda: zk.watch_children("/s", print))
    r("watch_data after close", lambda: type(zk.watch_data("/s", print)).__name__)  # kazoo ignores a closed client
    r.counts("zk")
    return r.steps


def sequence_ephemeral_conflict(backend: Backend) -> list[tuple[str, object]]:
    r = Record(backend)
    a, b = backend.client("a"), backend.client("b")
    r("a creates", lambda: a.create_ephemeral_expect_conflict("/o/t/0", b"a-0"))
    r("a again, same data", lambda: a.create_ephemeral_expect_conflict("/o/t/0", b"a-0"))
    r("a again, other data", lambda: a.create_ephemeral_expect_conflict("/o/t/0", b"a-1"))
    r("b, same data", lambda: b.create_ephemeral_expect_conflict("/o/t/0", b"a-0"))
    r("b, other data", lambda: b.create_ephemeral_expect_conflict("/o/t/0", b"b-0"))
    r("node", lambda: b.get("/o/t/0"))
    a.close()
    r("b after a closed", lambda: b.create_ephemeral_expect_conflict("/o/t/0", b"b-0"))
    r("node now", lambda: b.get("/o/t/0"))
    r.counts("a")
    r.counts("b")
    return r.steps


def sequence_watch_children(backend: Backend) -> list[tuple[str, object]]:
    r = Record(backend)
    zk, other = backend.client("zk"), backend.client("other")
    seen: list[list[str]] = []
    quiet: list[list[str]] = []
    zk.watch_children("/g", lambda children: seen.append(sorted(children)))
    other.create("/g/a", b"")
    wait_for(lambda: len(seen) == 2, timeout=10)
    other.set("/g/a", b"data")  # not a child change: no callback (the next step would show an extra one)
    other.create("/g/b", b"")
    wait_for(lambda: len(seen) == 3, timeout=10)
    zk.watch_children("/g", lambda children: quiet.append(sorted(children)), initial=False)
    other.delete("/g/a")
    wait_for(lambda: len(seen) == 4 and len(quiet) == 1, timeout=10)
    r("callbacks", lambda: seen)
    r("initial=False callbacks", lambda: quiet)
    r.counts("zk")
    r.counts("other")
    return r.steps


def sequence_watch_data(backend: Backend) -> list[tuple[str, object]]:
    r = Record(backend)
    zk, other = backend.client("zk"), backend.client("other")
    seen: list[bytes | None] = []
    quiet: list[bytes | None] = []
    zk.watch_data("/n", seen.append)
    steps = [lambda: other.create("/n", b"1"), lambda: other.set("/n", b"2"), lambda: other.set("/n", b""),
             lambda: other.delete("/n"), lambda: other.create("/n", b"3")]
    for n, step in enumerate(steps, start=2):
        step()
        wait_for(lambda n=n: len(seen) == n, timeout=10)
    zk.watch_data("/n", quiet.append, initial=False)
    other.set("/n", b"4")
    wait_for(lambda: len(seen) == 7 and len(quiet) == 1, timeout=10)
    r("callbacks", lambda: seen)
    r("initial=False callbacks", lambda: quiet)
    r.counts("zk")
    return r.steps


def sequence_session_expiry(backend: Backend) -> list[tuple[str, object]]:
    r = Record(backend)
    zk, other = backend.client("zk"), backend.client("other")
    states: list[str] = []
    renewed: list[int] = []
    children: list[list[str]] = []
    mine: list[bytes | None] = []
    zk.on_state_change(states.append)
    zk.on_new_session(lambda: renewed.append(1))
    zk.create("/ids/me", b"reg", ephemeral=True)
    zk.watch_children("/g", lambda c: children.append(sorted(c)))
    zk.watch_data("/ids/me", mine.append)
    old = zk.session_id
    backend.expire(zk)
    wait_for(lambda: renewed and states[-1:] == ["connected"] and mine[-1:] == [None], timeout=15)
    r("states", lambda: states)
    r("new-session callbacks", lambda: renewed)
    r("new session id", lambda: zk.session_id not in (None, old))
    r("registration gone", lambda: other.get("/ids/me"))
    other.create("/g/x", b"")
    wait_for(lambda: children[-1:] == [["x"]], timeout=10)
    r("children callbacks", lambda: children)
    r("data callbacks", lambda: mine)
    r.counts("zk")
    return r.steps


SEQUENCES = [sequence_requests, sequence_ephemeral_conflict, sequence_watch_children, sequence_watch_data,
             sequence_session_expiry]


@pytest.fixture
def real_backend(zk_connect: str) -> Iterator[Backend]:
    backend = Backend(
        "zookeeper", lambda label: ZkClient(zk_connect, session_timeout_ms=4000, log_id=label).start(),
        lambda client: expire_session(zk_connect, client.session_credentials),
    )
    yield backend
    backend.close()


@pytest.fixture
def memory_backend() -> Iterator[Backend]:
    server = MemoryZooKeeper(name="contract")
    backend = Backend(
        "memory", lambda label: MemoryZkClient(server, session_timeout_ms=4000, log_id=label).start(),
        lambda client: server.expire_session(client.session_id),
    )
    yield backend
    backend.close()


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.slow), "memory"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Either backend; the real one (and its Java server) only for the "zookeeper" parameter."""
    return request.getfixturevalue("real_backend" if request.param == "zookeeper" else "memory_backend")


@pytest.mark.slow
@pytest.mark.parametrize("sequence", SEQUENCES, ids=lambda s: s.__name__.removeprefix("sequence_"))
def test_memory_matches_real_zookeeper(sequence: Callable[[Backend], list], real_backend: Backend,
                                       memory_backend: Backend) -> None:
    real = sequence(real_backend)
    memory = sequence(memory_backend)
    assert memory == real


def test_null_data_reads_as_none_and_empty_data_as_empty_bytes(backend: Backend) -> None:
    zk = backend.client("zk")
    zk.create("/a/b", b"")
    data, stat = zk.get("/a")
    assert data is None and stat.dataLength == 0
    assert zk.get("/a/b")[0] == b""


def test_a_closed_client_fails_fast(backend: Backend) -> None:
    zk = backend.client("zk")
    zk.close()
    with pytest.raises(ZkClosedError):
        zk.create("/x", b"")


def test_get_many_is_the_reads_one_after_another(backend: Backend) -> None:
    """The pipelined batch (real ZooKeeper) answers and counts exactly as one `get` per path, in order, missing
    nodes as None, on both backends."""
    zk = backend.client("zk")
    for name, data in (("a", b"1"), ("b", b""), ("c", b"3")):
        zk.create(f"/many/{name}", data)
    before = zk.op_counts().get("get_data", 0)
    paths = ["/many/a", "/many/missing", "/many/b", "/many/c", "/many/a"]
    many = zk.get_many(paths)
    assert zk.op_counts().get("get_data", 0) - before == len(paths)
    assert [None if r is None else r[0] for r in many] == [b"1", None, b"", b"3", b"1"]
    assert [None if r is None else r[0] for r in many] == [None if r is None else r[0] for r in map(zk.get, paths)]
