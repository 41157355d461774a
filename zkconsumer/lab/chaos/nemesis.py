"""The campaign's nemesis: applies one planned fault to the running cluster and group, holds it, undoes it, and
records both moments as `fault` records (`start`, then `heal`) with what it hit (`target`) and how (`params`).

One fault at a time: `apply` returns after the heal. Targets are drawn here, from the campaign's random stream,
among what exists when the fault starts (docs/chaos.md):

    planned ──inject (record start)──▶ held for hold_s (stoppable) ──heal (record heal)──▶ done
                 └── the target was gone (no running member, no leader): recorded as `skipped`, nothing held
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkconsumer.lab.chaos import faults as f
from zkconsumer.lab.chaos.cluster import ChaosCluster
from zkconsumer.lab.chaos.members import ChaosMembers
from zkconsumer.lab.trace import TraceWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applied:
    """One fault as applied: the target it hit, its parameters, and the function that undoes it."""

    target: str
    params: dict[str, Any]
    heal: Callable[[], None]


class Nemesis:
    def __init__(self, cluster: ChaosCluster, members: ChaosMembers, trace: TraceWriter, rng: random.Random,
                 group: str, topic: str, partitions: int, stop: threading.Event) -> None:
        self.cluster = cluster
        self.members = members
        self.trace = trace
        self.rng = rng
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self._stop = stop

    def apply(self, spec: f.FaultSpec) -> bool:
        """Inject, hold, heal. False when the fault had no target (recorded as skipped)."""
        applied = self._inject(spec)
        if applied is None:
            self.trace.write("fault", fault_id=spec.fault_id, kind=spec.kind, phase="skipped", target="",
                             params={})
            return False
        params = {**spec.params, **applied.params, "hold_s": spec.hold_s}
        self.trace.write("fault", fault_id=spec.fault_id, kind=spec.kind, phase="start", target=applied.target,
                         params=params)
        log.info("chaos: fault %d %s on %s for %.1f s", spec.fault_id, spec.kind, applied.target, spec.hold_s)
        self._stop.wait(spec.hold_s)
        applied.heal()
        self.trace.write("fault", fault_id=spec.fault_id, kind=spec.kind, phase="heal", target=applied.target,
                         params=params)
        return True

    # --- the faults ------------------------------------------------------------------------------------

    def _inject(self, spec: f.FaultSpec) -> Applied | None:
        kind = spec.kind
        if kind in f.MEMBER_FAULTS:
            running = self.members.running()
            if not running:
                return None
            return self._member_fault(kind, self.rng.choice(running), spec)
        if kind == f.ZK_LEADER_KILL:
            server = self.cluster.kill_zk_leader()
            return Applied(f"zookeeper-{server}", {}, lambda: self.cluster.restart_zk(server))
        if kind == f.ZK_ENSEMBLE_STOP:
            self.cluster.stop_ensemble()
            return Applied("zookeeper", {}, self.cluster.start_ensemble)
        if kind == f.BROKER_KILL:
            leaders = self.cluster.partition_leaders(self.topic)
            candidates = sorted({b for b in leaders.values() if b is not None and b >= 0})
            if not candidates:
                return None
            broker = self.rng.choice(candidates)
            led = sorted(p for p, b in leaders.items() if b == broker)
            self.cluster.kill_broker(broker)
            return Applied(f"broker-{broker}", {"led": led}, lambda: self.cluster.restart_broker(broker))
        if kind in (f.MALFORMED_REGISTRATION, f.MALFORMED_OWNER, f.MALFORMED_OFFSET):
            what = kind.removeprefix("malformed_")
            partition = self.rng.randrange(self.partitions)
            written = self.cluster.write_malformed(what, self.group, self.topic, partition)
            return Applied(written.path, {"partition": partition, "data": written.data}, written.heal)
        raise ValueError(f"unknown fault kind {kind!r}")

    def _member_fault(self, kind: str, name: str, spec: f.FaultSpec) -> Applied:
        members, cluster = self.members, self.cluster
        if kind == f.MEMBER_KILL:
            pid = members.kill(name)
            return Applied(name, {"pid": pid}, lambda: members.start(name))
        if kind == f.MEMBER_PAUSE:
            pid = members.pause(name)
            return Applied(name, {"pid": pid}, lambda: members.resume(name))
        if kind == f.SESSION_EXPIRY:
            session = members.expire(name)
            return Applied(name, {"session": f"0x{session:x}"}, lambda: None)
        if kind == f.MEMBER_ZK_CUT:
            cluster.cut_member_zookeeper(name)
            return Applied(name, {}, lambda: cluster.restore_member(name))
        if kind == f.MEMBER_KAFKA_CUT:
            cluster.cut_member_kafka(name)
            return Applied(name, {}, lambda: cluster.restore_member(name))
        if kind == f.MEMBER_ZK_DELAY:
            cluster.delay_member_zookeeper(name, spec.params["delay_ms"])
            return Applied(name, {}, lambda: cluster.restore_member(name))
        raise ValueError(f"unknown member fault {kind!r}")
