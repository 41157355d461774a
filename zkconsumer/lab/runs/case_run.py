"""The lab's orchestrator: one case of a scenario on one design, from an empty group to a stopped one.

Phases (each a `phase` trace record): `setup` (topics), `initial` (the initial members start together),
`settled` (t=0 of the scenario: the group is stable), `churn` (steps applied at their times, stability tracked
after each), `done`. Every membership change is a `membership` record and the
time the group takes to be stable again a `stable` record; the wire records of both proxies, owner snapshots
and ZooKeeper `mntr` samples go to the run's own trace file.

Runs share ZooKeeper's root, where the broker registers and writes topics (a 0.8 consumer reads both under its
own chroot, so members get none): runs stay apart by their group and topic names, which carry the run's id.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zkconsumer.admin import alter_partitions, create_topic
from zkconsumer.lab.designs import FAITHFUL, MODE_DESIGN, design_label
from zkconsumer.lab.drivers.interface import DesignDriver, LabEnvironment
from zkconsumer.lab.members.naming import member_name, name_width
from zkconsumer.lab.runs import kraft_topics
from zkconsumer.lab.runs.links import MemberLinks
from zkconsumer.lab.runs.load import LoadProducer, wait_drained
from zkconsumer.lab.runs.migrate import MigratingDriver, has_migrate
from zkconsumer.lab.runs.servers import LabServers, SinkRouter
from zkconsumer.lab.runs.stability import POLL_S, ChangeTracker
from zkconsumer.lab.runs.state import LabRunError, RunState, check_transition
from zkconsumer.lab.scenarios.loading import Case
from zkconsumer.lab.trace import RunDirectory
from zkconsumer.lab.wire.mntr import MntrSampler
from zkconsumer.lab.wire.tcp import host_port
from zkconsumer.modes import mode_properties
from zkconsumer.zookeeper.client import ZkClient

log = logging.getLogger(__name__)
_OWNERS_EVERY_S = 0.5
INITIAL_WAVE = 32
DRAIN_TIMEOUT_S = 15.0  # members consume the load's last messages within a fetch or two; a loss never drains

Progress = Callable[[str], None]

__all__ = ["CaseRun", "LabRunError", "RunState", "make_driver"]


def make_driver(design: str, process_mode: str, mode: str = FAITHFUL) -> DesignDriver:
    if design == "zk":
        from zkconsumer.lab.drivers.zk import ZkDriver

        return ZkDriver(process_mode, mode_properties(mode))
    if design == "original":
        from zkconsumer.lab.drivers.original import OriginalDriver

        return OriginalDriver(process_mode)
    from zkconsumer.lab.drivers.coordinator import CoordinatorDriver, MemberKind

    # the broker-side designs: one driver, its members' client chosen once by the design
    return CoordinatorDriver(process_mode, MemberKind.for_design(design))


class CaseRun:
    """Runs `case` on `design` into `out_dir`; `run()` returns the run directory's path.

    Its state (`RunState`, runs/state.py) moves only forward, through `_transition`, which refuses a move the graph
    below lacks (so `run()` runs once). The manifest's `status` is the state it ends in::

        CREATED ─run()─► SETUP ─driver up─► STARTING ─t = 0─► CHURN ─duration over─► DRAINING
                           │                    │               │                        │
                           ├────────────────────┴───────────────┘ early: an error,       │ at the end
                           │                                      a failed member,       │
                           ▼                                      Ctrl-C                 │
                       STOPPING ◄────────────────────────────────────────────────────────┘
                           │
                           ▼
               COMPLETED | UNSETTLED | FAILED | INTERRUPTED

    t = 0 is the initial group stable. UNSETTLED: ran to the end, but the group was not stable again after the last
    change; INTERRUPTED: Ctrl-C; FAILED: any other early stop, or a member that ended on its own unseen until
    the end (its error names it and why).
    """

    def __init__(self, case: Case, design: str, servers: LabServers, out_dir: Path, *,
                 process_mode: str | None = None, progress: Progress | None = None, mode: str = FAITHFUL,
                 group_settings: str = "same") -> None:
        if mode != FAITHFUL and design != MODE_DESIGN:
            raise ValueError(f"mode {mode!r} on the {design} design: only {MODE_DESIGN} runs the opt-in modes")
        mode_properties(mode)  # an unknown mode fails here, before a run directory exists
        self.case = case
        self.design = design
        self.mode = mode
        label = design_label(design, mode)
        self.servers = servers
        # The broker this design's members talk to (the KRaft one for the newer protocols, runs/servers.py).
        self.side = servers.side(design)
        self.scenario = case.scenario
        self.process_mode = process_mode or self.scenario.group.process_mode
        self.progress = progress or (lambda _text: None)
        self.run_id = f"{case.case_id}-{label}-{uuid.uuid4().hex[:6]}"
        # A mode's run records its name and properties; the faithful mode's manifest is as before modes existed.
        modal = {} if mode == FAITHFUL else {"mode": mode, "mode_properties": mode_properties(mode)}
        if group_settings != "same":  # lab run --settings shipped (rules/shipped.py): the design's own defaults
            modal["group_settings"] = group_settings
        self.rundir = RunDirectory.create(out_dir / case.case_id / label, scenario=self.scenario.name,
                                       case=case.case_id, design=design, seed=case.seed, repeat=case.repeat,
                                       sweep={case.sweep_axis: case.sweep_value} if case.sweep_axis else {},
                                       process_mode=self.process_mode, run_id=self.run_id,
                                       scenario_definition=self.scenario.model_dump(mode="json"),
                                       servers=servers.describe(design), **modal)
        if design == "original":  # what the members ran, as the jar names it (the manifest's `versions`)
            from zkconsumer.lab.drivers.original import original_version

            self.rundir.manifest["versions"]["kafka_original"] = original_version()
            self.rundir.save()
        self.trace = self.rundir.trace("run", design)
        # A group of its own per run: the broker keeps group state between runs, and ZooKeeper's root is shared.
        self.group = f"lab-{self.scenario.name}-{self.run_id.rsplit('-', 1)[1]}"
        self.state = RunState.CREATED
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.changes = ChangeTracker(self.trace, {step.index: step.offset for step in case.steps}, design,
                                     self.rundir.path / "logs", self._stop)
        self._next_member = 0
        indices = [self.scenario.group.members - 1, *(i for step in case.steps for i in step.members)]
        self._name_width = name_width(max(indices))  # names padded alike in every run of the case (members/naming.py)
        self._load: LoadProducer | None = None

    # --- the run ---------------------------------------------------------------------------------------

    def run(self) -> Path:
        self._transition(RunState.SETUP)
        zk_router = SinkRouter()
        zk_proxies = self.servers.zookeeper_proxies(zk_router)
        self.links = MemberLinks(self.scenario, zk_proxies, self.side.proxy, self.servers.chroot)
        admin = ZkClient(self.servers.direct_zookeeper, session_timeout_ms=10000, log_id="lab-admin")
        driver: DesignDriver | None = None
        samplers: list[MntrSampler] = []
        outcome, error = RunState.FAILED, None
        try:
            zk_router.route(self.trace.sink("wire", proto="zk"))
            self.side.router.route(self.trace.sink("wire", proto="kafka"))
            self.links.reset_kafka()
            self._phase("setup")
            admin.start()
            topics = self._setup(admin)
            self._start_load(topics)
            for i, host in enumerate(self.servers.zookeeper):
                samplers.append(MntrSampler(*host_port(host), sink=self._mntr_sink(i), interval_s=1.0,
                                            name=f"lab-mntr{i}").start())
            env = LabEnvironment(self.rundir, self.case, self.group, topics, self.links.connect,
                                 self.side.proxy.bootstrap, self.servers.direct_zookeeper, self.trace)
            driver = make_driver(self.design, self.process_mode, self.mode)
            if has_migrate(self.case.steps):  # only a run with `migrate` steps gets the coordinator half
                driver = MigratingDriver(driver, self.process_mode)
            driver.start(env)
            self._transition(RunState.STARTING)
            self._start_observers(driver)
            self._phase("initial")
            self._start_initial_group(driver)
            self._phase("settled")
            self._transition(RunState.CHURN)
            settled = self._churn(driver, admin, topics)
            self._phase("done")
            self._transition(RunState.DRAINING)
            self._stop_load(drain=True)
            # Once more at the end: a member that ended between the loop's last failure check and the stability
            # check that then no longer counted it (or while the load drained) left a group that only looked
            # stable, and its change's identities fail; such a run is not a complete one either.
            self.changes.raise_if_failed(driver)
            if settled:
                outcome = RunState.COMPLETED
            else:  # its time to stable is unknown, not the timeout: the run must not count as a complete one
                outcome = RunState.UNSETTLED
                error = (f"the group did not become stable within settle_timeout ({self.scenario.settle_timeout:.0f} s)"
                         " after the last change")
        except KeyboardInterrupt:
            outcome, error = RunState.INTERRUPTED, "interrupted (SIGINT)"
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._transition(RunState.STOPPING)
            self._stop.set()
            self._stop_load(drain=False)
            ports = self._ports()
            stats = self._shutdown(driver, samplers, zk_proxies, admin, zk_router)
            self._transition(outcome)
            self.rundir.finish(self.state.value, error, stats=stats, ports=ports)
        return self.rundir.path

    def _transition(self, to: RunState) -> None:
        """The only place the state changes; raises ``IllegalTransition`` for a move the graph lacks."""
        self.state = check_transition(self.run_id, self.state, to)
        log.debug("run %s: %s", self.run_id, to.name)

    def _start_load(self, topics: dict[str, int]) -> None:
        """The scenario's `[load]`, straight to the broker (not through the proxy: not a member's cost), from
        before the first member starts; members begin at the earliest offset, so nothing produced is skipped."""
        load = self.scenario.load
        if load.rate > 0:
            self._load = LoadProducer(self.side.broker, topics, self.trace, rate=load.rate, keys=load.keys,
                                      message_size=load.message_size).start()

    def _stop_load(self, drain: bool) -> None:
        """Stop producing; with `drain`, give the members a bounded time to consume what was produced, so the
        delivery audit's gaps are losses and not messages in flight when the run ended."""
        load, self._load = self._load, None
        if load is None:
            return
        load.stop()
        if drain:
            self.progress("draining the load")
            wait_drained(self.rundir.path / "traces", dict(load.ranges.last), DRAIN_TIMEOUT_S, self._stop)

    def _start_initial_group(self, driver: DesignDriver) -> None:
        """Start the initial members in waves, each settled before the next: `INITIAL_WAVE` first, then as many
        as are already in the group (the group doubles with each wave). The initial group is not measured (t = 0
        is when it is stable); starting hundreds at once only makes every member re-read every registration many
        times over while the group keeps changing under it, and waves of a fixed size make every wave re-read
        the whole group again (a join costs ~M² reads, docs/join-cost.md): doubling reaches 256 in 4 waves. Each
        wave waits for a stable group at most the scenario's `start_timeout` (its `settle_timeout` when unset)."""
        remaining = self.scenario.group.members
        bound = self.scenario.start_timeout or self.scenario.settle_timeout
        while remaining:
            wave = min(remaining, max(INITIAL_WAVE, self._next_member))
            for _ in range(wave):
                self._join(driver, self._name(self._allocate()))
            remaining -= wave
            self.changes.await_stable(driver, bound, f"the initial group ({self._next_member} members)")

    def _setup(self, admin: ZkClient) -> dict[str, int]:
        topics = {}
        suffix = self.run_id.rsplit("-", 1)[1]
        for topic in self.scenario.group.topics:
            name = f"{topic.name}-{suffix}"
            if self.side.kind == "kraft":
                kraft_topics.create_topic(self.side.broker, name, topic.partitions)
            else:
                create_topic(admin, name, topic.partitions, self.side.broker)
            topics[name] = topic.partitions
        self._topic_names = {t.name: name for t, name in zip(self.scenario.group.topics, topics, strict=True)}
        return topics

    # --- churn -----------------------------------------------------------------------------------------

    def _churn(self, driver: DesignDriver, admin: ZkClient, topics: dict[str, int]) -> bool:
        """Apply the steps at their times; True if the group was stable after the last change."""
        self._phase("churn")
        t0 = time.monotonic()
        resumes: list[tuple[float, str]] = []
        steps = list(self.case.steps)
        while not self._stop.is_set():
            now = time.monotonic() - t0
            while steps and steps[0].at <= now:
                step = steps.pop(0)
                self.progress(f"t={step.at:.1f}s {step.kind}")
                resumes += self._apply(step, driver, admin, topics, t0)
            for due, name in [r for r in resumes if r[0] <= now]:
                resumes.remove((due, name))
                self.changes.membership("resume", [name], -1)
                driver.resume(name)
            # A member that ends on its own stops the run: once it is no longer live the rest of the group can look
            # stable, and the run would complete without it (and with its changes' identities failing).
            self.changes.raise_if_failed(driver)
            self.changes.track(driver)
            if now >= self.scenario.duration and not steps and not resumes:
                break
            time.sleep(POLL_S)
        if self.changes.pending:  # give the last change its settle time
            return self.changes.await_stable(driver, self.scenario.settle_timeout, "the group after the last change",
                                             fail=False)
        return True

    def _apply(self, step, driver: DesignDriver, admin: ZkClient, topics: dict[str, int],
               t0: float) -> list[tuple[float, str]]:
        action = step.action
        names = [self._name(i) for i in step.members]
        resumes: list[tuple[float, str]] = []
        if step.kind == "join":
            for i, index in enumerate(step.members):
                if i and action.interval:
                    time.sleep(action.interval)
                self._allocate(index)
                self.changes.membership("join", [self._name(index)], step.index)
                self._join(driver, self._name(index))
            return resumes
        if step.kind == "add_partitions":
            topic = self._topic_names[action.topic]
            # The change is timed from the request: members may react before the controller's znodes are all
            # written, which is when alter_partitions returns.
            self.changes.membership("add_partitions", [], step.index, topic=topic, total=action.total)
            self._add_partitions(admin, topic, action.total, topics)
            return resumes
        if step.kind == "kill_zk_leader":
            ensemble = self.servers.ensemble
            leader = ensemble.leader() if ensemble is not None else None
            if leader is None:
                raise LabRunError("kill_zk_leader needs the embedded 3-server ensemble (zk_servers = 3)")
            from zkconsumer.embedded.process import kill_process

            self.changes.membership("kill_zk_leader", [], step.index, server=leader.server_id)
            kill_process(leader.process)
            return resumes
        if step.kind == "delay":
            for name in names or driver.live_members():
                self.links.delay(name, action.target, action.delay_ms, action.jitter_ms)
            self.changes.membership("delay", names, step.index, target=action.target, delay_ms=action.delay_ms)
            return resumes
        # Each change is recorded before it is made: a leave returns only once the member's process has exited,
        # a second or more after its peers saw it go and rebalanced, so a record written afterwards would start the
        # change after its effects (and time to stable would read as the poll interval).
        for name in names:
            if step.kind == "restart":
                self.changes.membership(action.stop, [name], step.index)
                (driver.kill if action.stop == "kill" else driver.leave)(name)
                if action.delay:
                    time.sleep(action.delay)
                self.changes.membership("join", [name], step.index, restart=True)
                self._join(driver, name)
                continue
            self.changes.membership(step.kind, [name], step.index)
            if step.kind == "leave":
                driver.leave(name)
            elif step.kind == "kill":
                driver.kill(name)
            elif step.kind == "pause":
                driver.pause(name)
                resumes.append((time.monotonic() - t0 + action.seconds, name))
            elif step.kind == "expire":
                driver.expire(name)
            elif step.kind == "migrate":
                driver.migrate(name)  # type: ignore[attr-defined]
        return resumes

    def _add_partitions(self, admin: ZkClient, topic: str, total: int, topics: dict[str, int]) -> None:
        """`kafka-topics --alter --partitions`: CreatePartitions to the broker, whose controller rewrites the topic
        znode (the ZooKeeper design's members watch it) and elects the new partitions' leaders (the coordinator
        design's leader sees them at its next metadata refresh, `[coordinator] metadata_max_age_ms`). The group
        counts as stable again only once every partition of the grown topic is owned."""
        if self.side.kind == "kraft":
            kraft_topics.alter_partitions(self.side.broker, topic, total)
        else:
            alter_partitions(admin, topic, total, self.side.broker)
        topics[topic] = total

    # --- observation -----------------------------------------------------------------------------------

    def _start_observers(self, driver: DesignDriver) -> None:
        owners = getattr(driver, "owners", None)
        if owners is None:
            return

        def snapshot() -> None:
            while not self._stop.wait(_OWNERS_EVERY_S):
                try:
                    self.trace.write("owners", owners=owners())
                except Exception as exc:  # an observer must never stop the run
                    log.debug("owner snapshot failed: %s", exc)

        thread = threading.Thread(target=snapshot, name=f"lab-owners-{self.run_id}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _mntr_sink(self, server: int) -> Callable[[dict[str, Any]], None]:
        def write(sample: dict[str, Any]) -> None:
            self.trace.write("mntr", ts=sample.get("ts"), server=server, sample=sample)

        return write

    # --- helpers ---------------------------------------------------------------------------------------

    def _join(self, driver: DesignDriver, name: str) -> None:
        self.links.apply_rules(name)  # before it connects: a far member is far from its first packet
        driver.join(name)

    def _name(self, index: int) -> str:
        return member_name(index, self._name_width)

    def _allocate(self, index: int | None = None) -> int:
        if index is None:
            index = self._next_member
        self._next_member = max(self._next_member, index + 1)
        return index

    def _phase(self, phase: str) -> None:
        self.progress(phase)
        self.trace.write("phase", phase=phase)

    def _ports(self) -> dict[str, Any]:
        """Every port this run and its servers listened on (recorded so a test can check they are closed)."""
        links = self.links.zookeeper_ports()
        kafka = self.side.kafka
        return {"kafka_proxy": self.side.proxy.port, "broker": host_port(self.side.broker)[1],
                "broker_listeners": [lst.port for lst in kafka.listeners] if kafka is not None else [],
                "zookeeper": [host_port(h)[1] for h in self.servers.zookeeper], "zookeeper_proxy_links": links}

    def _shutdown(self, driver: DesignDriver | None, samplers: list[MntrSampler], zk_proxies: list,
                  admin: ZkClient, zk_router: SinkRouter) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        if driver is not None:
            try:
                stats = driver.stats()
            except Exception:
                log.exception("driver stats failed")
            driver.stop()
        for sampler in samplers:
            sampler.stop()
        for thread in self._threads:
            thread.join(5)
        for proxy in zk_proxies:
            proxy.stop()
        zk_router.route(None)
        self.side.router.route(None)
        admin.close()
        self.trace.close()
        return stats
