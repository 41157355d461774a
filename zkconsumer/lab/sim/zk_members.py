"""One simulated member: this project's `ZookeeperConsumerConnector` (with `NoFetchers`) whose threads are
simulated processes and whose ZooKeeper client runs in virtual time.

Nothing of the connector or the listener is re-implemented. What differs is given through their arguments:

* `zk_factory=`: a `SimZkClient`, whose callbacks go to this member's event process;
* `sync=` (rebalance/sync.py): a `VirtualSync` (virtual_sync.py), so every lock, event, condition and thread of
  the connector, its listener and its watch recipes blocks in virtual time: the rebalance backoff sleeps in
  virtual time, and the watcher thread is a process that ends when it would wait and runs again at the next
  trigger;
* with the shortcut, the listener's public steps `build_assignment_context` and `assign` (views.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from rebalance.events import EventKind, MemberEvent, MemberState
from rebalance.listener import ZKRebalancerListener
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.lab.sim.capacity import Resources
from zkconsumer.lab.sim.scheduler import Process, Scheduler
from zkconsumer.lab.sim.views import MemberShortcut, ViewCache
from zkconsumer.lab.sim.virtual_sync import VirtualSync
from zkconsumer.lab.sim.zk_config import ZkSimConfig
from zkconsumer.lab.sim.zk_env import SimServer, SimZkClient
from zkconsumer.members import NoFetchers
from zkconsumer.zookeeper import layout

# Event kinds `accounted_requests` (zkconsumer.lab.rules.join_cost) adds up.
ACCOUNTED = ("attempt_begin", "release", "claim", "rollback")


class MemberWorld(Protocol):
    """What a member uses of its simulation (zk_sim.ZkWorld)."""

    config: ZkSimConfig
    sched: Scheduler
    server: SimServer
    views: ViewCache
    resources: Resources | None
    instant: bool  # requests take no virtual time and callbacks run at once (the settled group's start)

    def record(self, member: SimMember, event: MemberEvent) -> None: ...


class SimMember:
    def __init__(self, world: MemberWorld, name: str, index: int, *, chroot_checks: bool = False) -> None:
        self.world = world
        self.name = name
        self.index = index  # the member's place in the group: which host and server it uses (capacity.py)
        self.consumer_id = f"{world.config.group}_{name}"
        self.chroot_checks = chroot_checks
        latency, seed = world.config.latency, world.config.seed
        # Separate streams, so that one process's draws never shift another's (shortcut and one-by-one runs then
        # draw identically even when a notification lands in the middle of a batch).
        self.sampler = latency.sampler(seed, name)
        self.recipe_sampler = latency.sampler(seed, f"{name}#watch")
        self.notify_sampler = latency.sampler(seed, f"{name}#notify")
        self.connector: ZookeeperConsumerConnector | None = None
        self.client: SimZkClient
        self.listener: ZKRebalancerListener
        self.crashed = False
        self.owning_at: int | None = None  # virtual time of the last transition to `owning`
        self._callbacks: deque[Callable[[], None]] = deque()
        self._event_process: Process | None = None
        self.sync = VirtualSync(world.sched, self.spawn, lambda: self.crashed)
        self._last_delivery = 0
        self.processes: list[Process] = []  # the live ones are ended by a crash

    # --- building ------------------------------------------------------------------------------------

    def config(self) -> ConsumerConfig:
        c = self.world.config
        return ConsumerConfig.from_properties({
            "group.id": c.group, "zookeeper.connect": "sim:2181", "consumer.id": self.name, "client.id": self.name,
            "zookeeper.session.timeout.ms": c.session_timeout_ms, "rebalance.backoff.ms": c.backoff_ms,
            "rebalance.max.retries": c.max_retries, "partition.assignment.strategy": c.strategy,
            # Rebalance-only members consume nothing: their offsets stay -1 and auto-commit would write nothing;
            # off, it starts no thread.
            "auto.commit.enable": False,
            **c.properties,
        })

    def build(self) -> ZookeeperConsumerConnector:
        """Construct the connector (its client connects: in a process, with virtual time) and wire it in."""
        connector = ZookeeperConsumerConnector(self.config(), zk_factory=self._zk_factory, fetcher_factory=NoFetchers,
                                               sync=self.sync)
        self.connector = connector
        listener = self.listener = connector.listener
        if self.world.config.shortcut:
            shortcut = MemberShortcut(self.world.views, self.world.server, self.client, listener)
            listener.build_assignment_context = shortcut.build_context  # type: ignore[method-assign]
            listener.assign = shortcut.assign  # type: ignore[method-assign]
        connector.add_event_listener(self._on_event)
        return connector

    def _zk_factory(self, config: ConsumerConfig, consumer_id: str) -> SimZkClient:
        self.client = SimZkClient(
            self.world.server, sampler=self.sampler, recipe_sampler=self.recipe_sampler, deliver=self.deliver,
            session_timeout_ms=config.zookeeper_session_timeout_ms, log_id=consumer_id,
            ids_path=layout.ids_dir(config.group_id), chroot_checks=self.chroot_checks,
            resources=self.world.resources, index=self.index, sync=self.sync)
        self.client.instant = self.world.instant
        self.client.on_registration_read = self._registration_read
        return self.client

    def _registration_read(self) -> None:
        self.world.views.stats.executed_reads += 1

    # --- the member's threads as processes -----------------------------------------------------------

    def deliver(self, callback: Callable[[], None]) -> None:
        """`dispatch=` of the client: a callback reaches the event process after a notification delay, in order."""
        sched = self.world.sched
        delay = 0 if self.world.instant else self.notify_sampler.notification()
        when = max(sched.now + delay, self._last_delivery)  # kazoo's event thread keeps the server's order
        self._last_delivery = when
        sched.call_at(when, lambda: self._enqueue(callback))

    def _enqueue(self, callback: Callable[[], None]) -> None:
        if self.crashed:
            return
        if self.world.instant:  # the settled group's start: nothing waits, so run it on the scheduler's thread
            callback()
            return
        self._callbacks.append(callback)
        if self._event_process is None or not self._event_process.alive:
            self._event_process = self.spawn("events", self._run_callbacks)

    def _run_callbacks(self) -> None:
        # kazoo's event thread: one callback at a time, in order; the process ends when there is nothing to run.
        while self._callbacks and not self.crashed:
            self._callbacks.popleft()()

    def spawn(self, role: str, target: Callable[[], Any], at: int | None = None) -> Process:
        self.processes = [p for p in self.processes if p.alive]
        process = self.world.sched.spawn(f"{self.name}-{role}", target, at)
        self.processes.append(process)
        return process

    # --- churn ---------------------------------------------------------------------------------------

    def join(self, streams: dict[str, int]) -> None:
        """In a process: the lab's `ZkMember.start()` for a rebalance-only member."""
        self.build().create_message_streams(streams)

    def leave(self) -> None:
        """In a process: the graceful leave (`shutdown()`: the session closes, the nodes vanish)."""
        assert self.connector is not None
        self.connector.shutdown()

    def crash(self) -> None:
        """kill -9: the member stops at once; its session lives on until the server expires it."""
        self.crashed = True
        self.client.crashed = True
        self._callbacks.clear()
        for process in self.processes:
            process._terminating = True  # it unwinds at its next resume; requests already sent still arrive

    # --- observation ---------------------------------------------------------------------------------

    def _on_event(self, event: MemberEvent) -> None:
        if event.kind == EventKind.STATE and event.data.get("state") == MemberState.OWNING:
            self.owning_at = self.world.sched.now
        self.world.record(self, event)

    @property
    def state(self) -> str:
        return str(self.listener.state)
