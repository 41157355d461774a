"""The in-memory ZooKeeper on a virtual clock: a server that tracks group views, and a `MemoryZkClient` whose
one request primitive takes virtual time.

`SimZkClient._call` is the only place a member's request leaves it (every `ZkOperations` call, so every
`ZkGroupStore`, `Ownership`, `OffsetCheckpoints` and registration step, goes through it): the request is applied
to the tree `up` later in virtual time (seeing, changing and firing watches at that instant) and the calling
process resumes with the outcome `down` after that (with a capacity, after its turn at every queue on the way:
capacity.py). A pipelined batch (`get_many`) is one such request standing for its reads. The watch recipes' own
reads do the same, on the member's event process. Notifications reach the member through `dispatch=` (see
`SimMember.deliver`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from rebalance.sync import THREADING, SyncPrimitives
from zkconsumer.lab.sim.capacity import WRITES, Resources
from zkconsumer.lab.sim.latency import WIRE_OP, MemberSampler
from zkconsumer.lab.sim.scheduler import MS, Scheduler
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.memory_client import MemoryZkClient
from zkconsumer.zookeeper.memory_nodes import Watcher, normalize
from zkconsumer.zookeeper.memory_server import MemoryZooKeeper
from zkconsumer.zookeeper.memory_watch import ChildrenWatch, DataWatch

T = TypeVar("T")
_NOT_REGISTRATION = object()


class SimServer(MemoryZooKeeper):
    """`MemoryZooKeeper` stamped with virtual time, which also numbers the versions of one group's view.

    `view_epoch` grows with every change to the group's registrations that a rebalance can see (a node under the
    ids dir created, deleted, or rewritten with another pattern or subscription). Two reads of the registrations
    at the same epoch see the same thing: that is what the identical-view shortcut relies on.
    """

    def __init__(self, sched: Scheduler, group: str) -> None:
        self.sched = sched
        self.view_epoch = 0
        self._ids_prefix = layout.ids_dir(group) + "/"
        self._children: dict[str, tuple[tuple[int, int], list[str]]] = {}
        super().__init__(name="sim", clock_ms=lambda: sched.now // MS)

    def _is_registration(self, path: str) -> bool:
        return path.startswith(self._ids_prefix)

    def _bump(self) -> None:
        self.view_epoch += 1

    def create(self, session_id: int, path: str, data: bytes | None = None, *, ephemeral: bool = False) -> str:
        created = super().create(session_id, path, data, ephemeral=ephemeral)
        if self._is_registration(created):
            self._bump()
        return created

    def set_data(self, session_id: int, path: str, data: bytes | None, version: int = -1) -> Any:
        path = normalize(path)
        before = self._subscription(path)
        stat = super().set_data(session_id, path, data, version)
        if before is not _NOT_REGISTRATION and self._subscription(path) != before:
            self._bump()
        return stat

    def _subscription(self, path: str) -> object:
        """What the listener uses of a registration (`Registration.topic_streams` reads pattern and subscription
        only): rewriting a node with a new timestamp changes no member's view."""
        if not self._is_registration(path):
            return _NOT_REGISTRATION
        node = self._nodes.get(path)
        try:
            registration = codecs.decode_registration(path, None if node is None else node.data)
        except codecs.ZnodeDataError:
            return node and node.data
        return registration.pattern, dict(registration.subscription)

    def _remove(self, path: str, zxid: int) -> None:  # every deletion: requests, session close and expiry
        super()._remove(path, zxid)
        if self._is_registration(path):
            self._bump()

    def get_children(self, session_id: int, path: str, watch: Watcher | None = None) -> list[str]:
        """As the base, but one list object per version of the children: every member's ChildrenWatch keeps the
        last list it saw, and 10,000 copies of a 10,000-name list would take gigabytes. Callers never mutate it
        (`ZkOperations.get_children` and the recipe callbacks copy)."""
        path = normalize(path)
        children = super().get_children(session_id, path, watch)
        with self.locked():
            node = self._nodes[path]
            cached = self._children.get(path)
            if cached is not None and cached[0] == (node.czxid, node.pzxid):
                return cached[1]
            self._children[path] = ((node.czxid, node.pzxid), children)
            return children

    def peek(self, path: str) -> bytes | None:
        """A node's data without a request: for computing a shared view once. A listed registration exists as
        long as the view epoch has not moved (KeyError otherwise)."""
        with self.locked():
            return self._nodes[path].data

    def count(self, session_id: int, kind: str, n: int = 1) -> None:
        """Requests the simulation counts instead of sending (the shortcut's reads, kazoo's closeSession)."""
        with self.locked():
            self._session_counts[session_id][kind] += n
            self._counts[kind] += n


class _RecipeHost:
    """What a watch recipe calls on its client, with the opcode its reads are timed as."""

    def __init__(self, client: SimZkClient, op: str) -> None:
        self.client = client
        self.server = client.server
        self.sched = client.sched
        self.op = op

    def _recipe_read(self, request: Callable[[int], T], *, wait: bool) -> T:
        return self.client._timed_recipe_read(self.op, request, wait)

    def _post(self, fn: Callable[[], None]) -> None:
        self.client._post(fn)

    def _add_listener(self, listener: Callable[[str], None]) -> None:
        self.client._add_listener(listener)

    def _remove_listener(self, listener: Callable[[str], None]) -> None:
        self.client._remove_listener(listener)

    def _holding(self) -> AbstractContextManager[None]:
        return self.client._holding()


class SimZkClient(MemoryZkClient):
    """A member's ZooKeeper client in virtual time.

    `instant`: requests take no virtual time (building the settled group before the measured change).
    `chroot_checks`: at start, the two `exists` a member connecting with a chroot sends (kazoo's and ours); the
    lab's members connect to ZooKeeper's root and send none.
    `crashed`: the process is dead; it learns nothing more (no notification, no session renewal).
    `sync`: the member's primitives (virtual_sync.py); the watch recipes hold its lock across their reads.
    """

    def __init__(self, server: SimServer, *, sampler: MemberSampler, recipe_sampler: MemberSampler,
                 deliver: Callable[[Callable[[], None]], None], session_timeout_ms: int, log_id: str,
                 ids_path: str, chroot_checks: bool = False, resources: Resources | None = None,
                 index: int = 0, sync: SyncPrimitives = THREADING) -> None:
        self.sched = server.sched
        self.resources = resources  # None: no queueing (capacity.py)
        self.index = index  # which host and server this member uses
        self.sync = sync
        self.sampler = sampler
        self.recipe_sampler = recipe_sampler
        self.instant = False
        self.crashed = False
        self.chroot_checks = chroot_checks
        self.ids_path = ids_path
        self.ids_epoch_seen = -1  # the view epoch when this member's last listing of the ids dir was applied
        self.on_registration_read: Callable[[], None] | None = None  # a registration read is sent
        self._deliver = deliver
        super().__init__(server, session_timeout_ms=session_timeout_ms, log_id=log_id, dispatch=self._dispatch)
        self.server: SimServer = server

    # --- timing --------------------------------------------------------------------------------------

    def _timed(self, op: str, sampler: MemberSampler, apply: Callable[[], T], reads: int = 0) -> T:
        """Send a request (or, with `reads` > 1, a pipelined batch of that many reads): it is applied to the tree
        `up` later (by the scheduler, which costs no thread switch) and the calling process resumes with the
        outcome `down` after that; with a capacity, after waiting its turn at every queue on the way too."""
        sched = self.sched
        if self.instant or sched.running() is None:
            return apply()
        up, down = sampler.split(op)
        outcome: list[Any] = []

        def at_server() -> None:
            try:
                outcome.append((True, apply()))
            except Exception as exc:  # the reply carries it back
                outcome.append((False, exc))

        if self.resources is None:
            apply_at = sched.now + up
            sched.call_at(apply_at, at_server)  # scheduled first: at a tie it runs before the resume
            sched.sleep_until(apply_at + down)
        else:
            me = sched.running()
            self._queued(op, reads, up, down, at_server, lambda: sched.wake(me))  # type: ignore[arg-type]
            sched.block()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _queued(self, op: str, reads: int, up: int, down: int, at_server: Callable[[], None],
                done: Callable[[], None]) -> None:
        """The request's way through the queues (capacity.py): each queue is offered the request when it
        arrives there in virtual time, so every queue serves in order of arrival."""
        sched, resources = self.sched, self.resources
        assert resources is not None
        host_work, proxy_work, server_work = resources.cost(op, reads)
        host, server, proxy = resources.host(self.index), resources.server(self.index), resources.proxy

        def at_proxy() -> None:
            sched.call_at(proxy.serve(sched.now, proxy_work // 2), at_server_queue)  # type: ignore[union-attr]

        def at_server_queue() -> None:
            done_at = server.serve(sched.now, server_work)
            if op in WRITES:  # every server applies every write; it is logged first
                for other in resources.servers:
                    if other is not server:
                        other.occupy(sched.now, server_work)
                if resources.log is not None:
                    sched.call_at(done_at, at_log)
                    return
            sched.call_at(done_at, served)

        def at_log() -> None:
            sched.call_at(resources.log.serve(sched.now, resources.write_work), served)  # type: ignore[union-attr]

        def served() -> None:
            at_server()
            back = sched.now if proxy is None else proxy.serve(sched.now, proxy_work - proxy_work // 2)
            sched.call_at(back + down, at_host)

        def at_host() -> None:
            sched.call_at(host.serve(sched.now, host_work - host_work // 2), done)

        sent = host.serve(sched.now, host_work // 2)
        sched.call_at(sent + up, at_server_queue if proxy is None else at_proxy)

    def batch(self, reads: int, at_server: Callable[[], T]) -> T:
        """`reads` getData pipelined on the one session (`ZkClient.get_many`): one round trip, one job of `reads`
        reads at each queue, and `at_server` (which makes or counts the reads) runs when the server has served
        them all. No read, no request."""
        if reads == 0:
            return at_server()
        return self._timed("getData", self.sampler, at_server, reads)

    def get_many(self, paths: list[str]) -> list[tuple[bytes | None, Any] | None]:
        return self.batch(len(paths), lambda: [self.get(path) for path in paths])

    def _call(self, kind: str, path: str, request: Callable[[int], T]) -> T:
        def apply() -> T:
            if kind == "get_data" and path.startswith(self.ids_path + "/") and self.on_registration_read:
                self.on_registration_read()
            result = super(SimZkClient, self)._call(kind, path, request)
            if kind == "get_children" and path == self.ids_path:
                self.ids_epoch_seen = self.server.view_epoch
            return result

        return self._timed(WIRE_OP[kind], self.sampler, apply)

    def _timed_recipe_read(self, op: str, request: Callable[[int], T], wait: bool) -> T:
        return self._timed(op, self.recipe_sampler, lambda: MemoryZkClient._recipe_read(self, request, wait=wait))

    def _install_children_watch(self, path: str, on_change: Callable[[list[str]], bool | None]) -> None:
        ChildrenWatch(_RecipeHost(self, "getChildren"), path, on_change, sync=self.sync)  # type: ignore[arg-type]

    def _install_data_watch(self, path: str, on_change: Callable[..., bool | None]) -> None:
        DataWatch(_RecipeHost(self, "getData"), path, on_change, sync=self.sync)  # type: ignore[arg-type]

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> SimZkClient:
        super().start()
        if self.chroot_checks:
            for _ in range(2):
                self.exists("/")
        return self

    def close(self) -> None:
        """kazoo sends closeSession and waits for its reply; the in-memory server does not count it, we do."""
        if self.closed or not self._started:
            super().close()
            return
        self._count("close_session")
        session = self._session_id
        assert session is not None

        def close_session() -> None:
            self.server.count(session, "close_session")
            MemoryZkClient.close(self)

        self._timed("closeSession", self.sampler, close_session)

    def _on_expired(self, session_id: int, dropped: list[Watcher]) -> None:
        if not self.crashed:  # a killed process never hears that its session ended
            super()._on_expired(session_id, dropped)

    def _dispatch(self, callback: Callable[[], None]) -> None:
        if not self.crashed:
            self._deliver(callback)


def instant_client(server: MemoryZooKeeper, log_id: str) -> MemoryZkClient:
    """An observer/admin client outside the simulation: no virtual time, callbacks run inline, counted apart."""
    return MemoryZkClient(server, log_id=log_id, dispatch=lambda callback: callback()).start()


__all__ = ["SimServer", "SimZkClient", "instant_client"]
