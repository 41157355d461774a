"""Capacity: the ZooKeeper servers, the lab's counting proxy and the members' host processes as queues.

Without a capacity (`ZkSimConfig.capacity=None`) every request costs one sampled round trip however many are in
flight. With one, a request also waits its turn at every resource it needs, each a FIFO queue with a service
time measured by `benchmarks/bench_zk_capacity.py` (docs/simulation.md, "Capacity"):

    member host (send) -> wire up -> proxy -> server (applied here) -> proxy -> wire down -> member host (reply)

* a **member host** is one Python process (one GIL) running up to `members_per_host` members: one request at a
  time, `client_ms` of CPU per request (half to send it, half to take the reply), `batch_read_ms` per read of
  a pipelined batch (`ZkClient.get_many`: the M registration reads of one attempt);
* the **proxy** (the lab's `ZkProxy`: one event-loop thread for every member's link) forwards one request at a
  time, `proxy_ms` per request (`proxy_batch_ms` per read of a batch: one socket read carries many), half each
  way;
* a **server** works on `server_threads` requests at once, `server_ms` each (`server_write_ms` a write); a
  member's requests go to its own
  server (member index mod `servers`), and every server also applies each write (its own copy of the tree);
* a **write** (create, delete, setData, closeSession) is also logged before it is applied: the transaction
  log's fsync takes `write_ms` (a disk, not a CPU), and writes that arrive while one flush is under way share
  the next one (ZooKeeper's `SyncRequestProcessor` group commit); in an ensemble `write_ms` is the quorum's;
* with `cores`, all of them share that many CPUs (one machine, as in the lab): a step waits for its queue and
  for a free core.

A pipelined batch of n reads is one job of n times the per-read cost at every queue, and the server applies its
n reads at one instant (the end of that job): a member's batch is served back to back, as one session's
pipelined requests arrive together. Queues are served in order of arrival in virtual time (ties in scheduling
order), so a run stays a deterministic function of its seed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from zkconsumer.lab.sim.latency import LatencyModel, default_tables
from zkconsumer.lab.sim.scheduler import MS

WRITES = frozenset({"create", "delete", "setData", "closeSession"})


@dataclass(frozen=True)
class Capacity:
    """Service times (ms of CPU per request) and how many of each resource there is."""

    server_ms: float
    client_ms: float
    batch_read_ms: float
    proxy_ms: float = 0.0  # 0: members talk to the servers directly
    proxy_batch_ms: float = 0.0
    servers: int = 1
    server_threads: int = 1
    members_per_host: int = 32
    min_hosts: int = 1
    cores: int | None = None  # None: every queue has CPUs of its own
    wire_ms: float = 0.2  # median round trip of the network alone (the latency tables are rescaled to it)
    write_ms: float = 0.0  # the transaction log's flush (fsync; a quorum's in an ensemble)
    server_write_ms: float | None = None  # server CPU per write; None: `server_ms`

    def __post_init__(self) -> None:
        if min(self.server_ms, self.client_ms, self.batch_read_ms, self.proxy_ms, self.proxy_batch_ms,
               self.write_ms) < 0 or (
                self.wire_ms <= 0) or (self.server_write_ms or 0) < 0:
            raise ValueError("service times must be >= 0 and wire_ms > 0")
        if min(self.servers, self.server_threads, self.members_per_host, self.min_hosts, self.cores or 1) < 1:
            raise ValueError("counts of servers, threads, hosts and cores must be >= 1")

    def hosts(self, members: int) -> int:
        """Member hosts for a group of `members` (the lab's rule: at least `min_hosts`, at most
        `members_per_host` members each)."""
        return max(self.min_hosts, math.ceil(members / self.members_per_host))

    def slowed(self, factor: float) -> Capacity:
        """Every CPU step `factor` times longer: the same machine with only 1/factor of its CPUs for this work
        (other work running on it)."""
        cpu = ("server_ms", "client_ms", "batch_read_ms", "proxy_ms", "proxy_batch_ms")
        changes: dict[str, float | None] = {name: getattr(self, name) * factor for name in cpu}
        changes["server_write_ms"] = None if self.server_write_ms is None else self.server_write_ms * factor
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def wire(self, scale: float = 1.0) -> LatencyModel:
        """The packaged ZooKeeper latency tables rescaled so that a getData's median round trip is `wire_ms`:
        their spread (which gives each seed its own timing), without the load they were measured under."""
        median = default_tables("zk")["getData"][50]
        return LatencyModel(scale=scale * self.wire_ms / median)


# Calibrated from the benchmark alone (benchmarks/bench_zk_capacity.py, one server, 2 client processes;
# docs/simulation.md "Capacity"), never from herd runs: CPU per request of the server JVM at 64 reads in flight
# per client (0.10 direct, 0.12 through the proxy), of a client process per read of a 64-read batch (0.15) and per
# lone request (0.40 through the proxy, 0.31 direct), of the proxy per read of a batch (0.13) and per lone
# request (0.34). A lone write's round trip exceeds a lone read's by 1.65-2.95 ms (three runs, median 1.76), of
# which 0.55-0.70 ms is server CPU (0.86-1.01 per write against 0.29-0.34 per read): the rest, 1.2 ms, is the
# log. The lab's threads mode: one server, the proxy, one member host per core before any host takes a second
# member, up to 32 members a host, everything on the machine's 2 cores.
LAB = Capacity(server_ms=0.11, client_ms=0.4, batch_read_ms=0.15, proxy_ms=0.34, proxy_batch_ms=0.13, servers=1,
               server_threads=2, members_per_host=32, min_hosts=2, cores=2, wire_ms=0.1, write_ms=1.2,
               server_write_ms=0.7)

# Outside the lab, for N up to 10,000 (docs/simulation.md "Capacity", what each assumes): the same costs per
# request as measured here, every member a process with a core of its own (no shared host, no proxy), servers
# of 4 cores each, 0.2 ms networks, a 2 ms quorum write; one standalone server, or a 3-server ensemble whose
# members are spread over the servers (reads served by a member's own server).
DEDICATED = Capacity(server_ms=0.11, client_ms=0.4, batch_read_ms=0.15, servers=1, server_threads=4,
                     members_per_host=1, wire_ms=0.2, write_ms=2.0, server_write_ms=0.7)
ENSEMBLE3 = dataclasses.replace(DEDICATED, servers=3)

PROFILES: dict[str, Capacity] = {"lab": LAB, "dedicated": DEDICATED, "ensemble3": ENSEMBLE3}


def profile(name: str | None) -> Capacity | None:
    """A named capacity (`PROFILES`), or None for none."""
    if name is None:
        return None
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown capacity profile {name!r}; known: {sorted(PROFILES)}") from None


class CorePool:
    """CPUs shared by several queues. A step takes the core that became free latest before it is ready (so an
    earlier-free core stays for a step that is ready sooner), else the first core to become free."""

    def __init__(self, cores: int) -> None:
        self.free = [0] * cores
        self.busy = 0

    def book(self, ready: int, work: int) -> int:
        free = self.free
        idle = [i for i, at in enumerate(free) if at <= ready]
        if idle:
            core, start = max(idle, key=free.__getitem__), ready
        else:
            core = min(range(len(free)), key=free.__getitem__)
            start = free[core]
        free[core] = start + work
        self.busy += work
        return start


@dataclass
class Queue:
    """A FIFO resource of `slots` parallel workers (one: a GIL, the proxy's loop thread)."""

    name: str
    slots: int = 1
    pool: CorePool | None = None
    busy: int = 0  # ns of service given
    jobs: int = 0
    free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.free = [0] * self.slots

    def serve(self, arrival: int, work: int) -> int:
        """A job arriving now (`arrival` is the current virtual time: jobs must be offered in time order)
        needing `work` ns; returns when it is done."""
        slot = min(range(self.slots), key=self.free.__getitem__)
        start = max(arrival, self.free[slot])
        if self.pool is not None and work:
            start = self.pool.book(start, work)
        self.free[slot] = start + work
        self.busy += work
        self.jobs += 1
        return start + work

    def occupy(self, arrival: int, work: int) -> None:
        """Work this queue must also do (another server's copy of a write) that nobody waits for."""
        self.serve(arrival, work)


class GroupCommit:
    """The transaction log: one flush at a time, each `work` long; every write that arrives before a flush
    starts is in it (a write arriving during a flush waits for the next one)."""

    def __init__(self) -> None:
        self.start = self.end = 0  # the last flush scheduled
        self.busy = 0
        self.flushes = 0

    def serve(self, arrival: int, work: int) -> int:
        if arrival < self.start:  # the next flush has not begun: ride along
            return self.end
        self.start = max(arrival, self.end)
        self.end = self.start + work
        self.busy += work
        self.flushes += 1
        return self.end


class Resources:
    """The queues of one simulation."""

    def __init__(self, capacity: Capacity, members: int) -> None:
        self.capacity = capacity
        self.pool = CorePool(capacity.cores) if capacity.cores else None
        self.servers = [Queue(f"server{i}", capacity.server_threads, self.pool) for i in range(capacity.servers)]
        self.proxy = Queue("proxy", 1, self.pool) if capacity.proxy_ms else None
        self.hosts = [Queue(f"host{i}", 1, self.pool) for i in range(capacity.hosts(members))]
        self.log = GroupCommit() if capacity.write_ms else None
        self.write_work = round(capacity.write_ms * MS)

    def host(self, index: int) -> Queue:
        return self.hosts[index % len(self.hosts)]

    def server(self, index: int) -> Queue:
        return self.servers[index % len(self.servers)]

    def busy_s(self) -> dict[str, float]:
        """Seconds of service each kind of resource gave (the busiest host and server; every core together)."""
        busy = {"server": max(q.busy for q in self.servers) / 1e9, "host": max(q.busy for q in self.hosts) / 1e9}
        if self.proxy is not None:
            busy["proxy"] = self.proxy.busy / 1e9
        if self.pool is not None:
            busy["cores"] = self.pool.busy / 1e9
        if self.log is not None:
            busy["log"] = self.log.busy / 1e9
        return busy

    def cost(self, op: str, reads: int) -> tuple[int, int, int]:
        """(host, proxy, server) work in ns for one request (`reads` = 0) or a batch of `reads` reads."""
        c = self.capacity
        if op in WRITES and c.server_write_ms is not None:
            return round(c.client_ms * MS), round(c.proxy_ms * MS), round(c.server_write_ms * MS)
        if reads > 1:
            return (round(reads * c.batch_read_ms * MS), round(reads * c.proxy_batch_ms * MS),
                    round(reads * c.server_ms * MS))
        return round(c.client_ms * MS), round(c.proxy_ms * MS), round(c.server_ms * MS)


__all__ = ["DEDICATED", "ENSEMBLE3", "LAB", "PROFILES", "WRITES", "Capacity", "CorePool", "GroupCommit", "Queue",
           "Resources", "profile"]
