"""`zkconsumer lab chaos`: a random fault campaign against a consuming group, judged afterwards from its history.

The shape is Jepsen's: a generator (faults.py) plans the faults from the seed; a nemesis (nemesis.py) applies
them one at a time; every client records what it did (the producer its acknowledged offsets, each member its
consumption, commits and rebalances, the observer the group's znodes, the orchestrator its member processes);
and checkers (checkers.py) judge the recorded history once the run is over, so an old history can be judged again
and a new checker added without running the faults again (`zkconsumer lab chaos-check DIR`).

A campaign's states:

    SETUP (3 ZooKeeper servers, 3 brokers, the topic at replication 3, the load, the members)
      ──the group converges──▶ FAULTS: for each planned fault: inject ─▶ hold ─▶ heal ─▶ await re-convergence
      (bounded by CampaignSettings.settle_bound_s) ─▶ quiet for RECOVERY_S
      ──plan done, or --duration spent──▶ DRAIN (stop the load; the members consume what was produced)
      ──▶ STOP (members leave, servers stop) ──▶ CHECK (the checkers over the history; chaos.json; the table)

Interrupted (Ctrl-C) or failed, it still drains what it can, stops everything it started, and keeps the history.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.lab.chaos import faults as f
from zkconsumer.lab.chaos.cluster import ChaosCluster
from zkconsumer.lab.chaos.members import ChaosMembers
from zkconsumer.lab.chaos.nemesis import Nemesis
from zkconsumer.lab.chaos.observer import GroupObserver
from zkconsumer.lab.chaos.prescribed import converged
from zkconsumer.lab.members.zk import ZkMemberSettings
from zkconsumer.lab.runs.load import LoadProducer, wait_drained
from zkconsumer.lab.runs.state import RunState
from zkconsumer.lab.trace import RunDirectory, TraceWriter
from zkconsumer.modes import mode_properties

log = logging.getLogger(__name__)

GROUP = "chaos"
TOPIC = "chaos-stream"
RECOVERY_S = 1.0  # quiet time after the group re-converged, before the next fault
FIRST_CONVERGENCE_S = 120.0  # the members' first rebalance, with six JVMs starting on two cores
DRAIN_S = 90.0
LOAD_FLUSH_S = 30.0  # acks=all on a cluster that may still be catching a restarted broker up
# The consumer's settings: Kafka 0.8.2's defaults except two (docs/chaos.md, the consumer's settings):
# - the commit interval, 60 s by default, which would make every fault replay a minute of work (the lab's scenarios
#   use 1000 ms too, docs/lab.md);
# - rebalance.max.retries, 4 by default: a peer whose ZooKeeper link is slowed holds its partitions for as long as
#   the delay lasts (up to 10 s here), the others' claims conflict meanwhile, and with 4 tries (about 10 s) one of
#   them gave up for good in the first 100-fault run, as field reports 23 to 25 describe; 0.8 never retries a failed
#   rebalance by itself. 10 tries cover the longest hold, as operators raised it.
CONSUMER_PROPERTIES: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 6000, "zookeeper.sync.time.ms": 2000, "rebalance.max.retries": 10,
    "rebalance.backoff.ms": 2000, "auto.commit.enable": True, "auto.commit.interval.ms": 1000,
    "partition.assignment.strategy": "range", "auto.offset.reset": "smallest",
}


@dataclass(frozen=True)
class CampaignSettings:
    faults: int
    seed: int
    members: int = 4
    partitions: int = 12
    duration_s: float | None = None  # stop injecting once this much time has passed (fewer faults then)
    rate: float = 100.0  # messages per second, keyed
    keys: int = 64
    kinds: tuple[str, ...] = f.FAULT_KINDS
    properties: dict[str, Any] = field(default_factory=lambda: dict(CONSUMER_PROPERTIES))
    mode: str = "faithful"  # the members' opt-in mode (zkconsumer/modes.py), added to `properties`
    topic: str = TOPIC  # another topic and group let a second campaign share one cluster (the tests do)
    group: str = GROUP

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", {**self.properties, **mode_properties(self.mode)})
        if self.members < 1:
            raise ValueError(f"--members must be at least 1, got {self.members}")
        if self.partitions < 1:
            raise ValueError(f"the topic needs at least one partition, got {self.partitions}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"--duration must be positive, got {self.duration_s}")

    @property
    def session_timeout_s(self) -> float:
        return int(self.properties["zookeeper.session.timeout.ms"]) / 1000.0

    @property
    def settle_bound_s(self) -> float:
        """How long re-convergence may take after a heal: the session timeout (a dead member's registration and
        owners outlive it that long) plus one full rebalance budget (every retry and its backoff, each after a
        sync wait), as 0.8.2 spends it (docs/chaos.md)."""
        p = self.properties
        budget = int(p["rebalance.max.retries"]) * (int(p["rebalance.backoff.ms"]) + int(p["zookeeper.sync.time.ms"]))
        # patient membership waits up to ten settle windows before it rebalances (rebalance/listener.py, settle)
        patience = 10 * int(p.get("zkconsumer.patient.membership.ms", 0))
        return self.session_timeout_s + (budget + patience) / 1000.0

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "kinds": list(self.kinds),
                "settle_bound_s": self.settle_bound_s}


def _acks_all_producer(bootstrap: str) -> Callable[[], Any]:
    """acks=all with min.insync.replicas=2 (cluster.py): an acknowledged message survives one broker's kill -9,
    so a gap in the audit is the consumer's, never the producer's."""
    def make() -> Any:
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, client_id="chaos-load",
                             retries=2**31 - 1, metadata_max_age_ms=1000, enable_idempotence=False,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=10000)
    return make


class Campaign:
    def __init__(self, settings: CampaignSettings, out: Path, progress: Callable[[str], None] | None = None,
                 cluster: ChaosCluster | None = None) -> None:
        self.settings = settings
        self.out = out
        self.cluster = cluster  # servers already running (a test's), used and left running; None: start its own
        self.progress = progress or (lambda line: log.info("chaos: %s", line))  # one line per fault, for people
        self.stop = threading.Event()  # Ctrl-C: stop injecting, then drain and stop as usual
        self.run: RunDirectory | None = None
        self.faults_applied = 0

    def execute(self) -> Path:
        """Run the campaign; returns the run directory (the history). Servers and members are stopped on exit."""
        s = self.settings
        self.run = run = RunDirectory.create(self.out, scenario="chaos", design="zk", seed=s.seed, run_id=self.out.name,
                                             campaign=s.describe())
        trace = run.trace("campaign", "zk")
        status, error = RunState.FAILED, None
        try:
            with nullcontext(self.cluster) if self.cluster else ChaosCluster(run.path / "servers") as cluster:
                cluster.create_topic(s.topic, s.partitions)
                status = self._run(cluster, trace)
                error = None if status is RunState.COMPLETED else status.value
        except KeyboardInterrupt:
            status, error = RunState.INTERRUPTED, "interrupted"
        except Exception as exc:
            log.exception("chaos: the campaign failed")
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            trace.write("campaign", phase="end", settings=s.describe(), status=status.value,
                        faults_applied=self.faults_applied)
            trace.close()
            ended = status if status in (RunState.COMPLETED, RunState.INTERRUPTED) else RunState.FAILED
            run.finish(ended.value, error=error,
                       faults_applied=self.faults_applied)
        return run.path

    def _run(self, cluster: ChaosCluster, trace: TraceWriter) -> RunState:
        s, run = self.settings, self.run
        assert run is not None
        trace.write("campaign", phase="start", settings=s.describe())
        observer = GroupObserver(cluster.direct_zookeeper, s.group, [s.topic], trace).start()
        load_trace = run.trace("load", "zk")
        load = LoadProducer(cluster.bootstrap, {s.topic: s.partitions}, load_trace, rate=s.rate, keys=s.keys,
                            producer_factory=_acks_all_producer(cluster.bootstrap)).start()

        def member_settings(name: str) -> ZkMemberSettings:
            return ZkMemberSettings(name=name, group=s.group, zookeeper_connect=cluster.member_zookeeper_connect(name),
                                    topics={s.topic: 1}, properties=dict(s.properties),
                                    trace_path=str(run.path / "traces" / f"{name}.jsonl"))

        members = ChaosMembers(trace, member_settings, run.path / "logs", cluster.direct_zookeeper)
        status = RunState.COMPLETED
        try:
            for i in range(s.members):
                members.start(f"m{i}")
            if not self._await_converged(observer, members, FIRST_CONVERGENCE_S):
                raise RuntimeError(f"the group did not converge within {FIRST_CONVERGENCE_S:.0f} s of its start: "
                                   f"see {run.path / 'logs'}")
            status = self._faults(cluster, members, observer, trace)
        finally:
            # Each step runs whatever the one before it did: a load that cannot flush its last batch must not
            # leave the members running or the history undrained.
            try:
                load.stop(timeout=LOAD_FLUSH_S)
            except Exception as exc:  # its unacknowledged messages are in no `produce` record: not audited
                log.warning("chaos: the load's last messages were not all acknowledged: %s", exc)
            try:
                if status is not RunState.INTERRUPTED:
                    wait_drained(run.path / "traces", dict(load.ranges.last), DRAIN_S)
            finally:
                load_trace.close()
                members.stop_all()
                observer.stop()
        return status

    def _faults(self, cluster: ChaosCluster, members: ChaosMembers, observer: GroupObserver,
                trace: TraceWriter) -> RunState:
        s = self.settings
        plan = f.plan_faults(s.faults, s.seed, s.session_timeout_s, s.kinds)
        nemesis = Nemesis(cluster, members, trace, random.Random(f"{s.seed}/targets"), s.group, s.topic, s.partitions,
                          self.stop)
        began = time.monotonic()
        for spec in plan:
            if self.stop.is_set():
                return RunState.INTERRUPTED
            if s.duration_s is not None and time.monotonic() - began >= s.duration_s:
                log.info("chaos: --duration spent after %d faults", self.faults_applied)
                break
            applied = nemesis.apply(spec)
            self.faults_applied += int(applied)
            healed = time.monotonic()
            settled = self._await_converged(observer, members, s.settle_bound_s + 10.0)
            what = (f"re-converged {time.monotonic() - healed:.1f} s after its heal" if settled
                    else "NOT re-converged within the bound + 10 s (the checkers say how)")
            self.progress(f"[{time.monotonic() - began:6.0f} s] fault {spec.fault_id}/{len(plan)} {spec.kind}: "
                          f"{what if applied else 'skipped (no target)'}")
            self.stop.wait(RECOVERY_S)
        return RunState.INTERRUPTED if self.stop.is_set() else RunState.COMPLETED

    def _await_converged(self, observer: GroupObserver, members: ChaosMembers, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        since = time.time()
        strategy = str(self.settings.properties["partition.assignment.strategy"])
        while not self.stop.is_set():
            view = observer.latest(since)
            if view is not None and converged(view, self.settings.group, members.names(), strategy):
                return True
            if time.monotonic() >= deadline:
                return False
            self.stop.wait(0.2)
        return False


def write_results(run_dir: Path, results: dict[str, Any]) -> Path:
    path = run_dir / "chaos.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=True))
    return path
