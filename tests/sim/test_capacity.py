"""The capacity model: servers, the proxy and the members' hosts as FIFO queues (zkconsumer/lab/sim/capacity.py)."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from zkconsumer.lab.rules.join_cost import join_requests
from zkconsumer.lab.sim import LatencyModel, SweepPoint, ZkSimConfig, predict, simulate_zk
from zkconsumer.lab.sim.bounds import utilisation
from zkconsumer.lab.sim.capacity import LAB, Capacity, CorePool, GroupCommit, Queue, Resources, profile
from zkconsumer.lab.sim.scheduler import MS, Scheduler
from zkconsumer.lab.sim.zk_env import SimServer, SimZkClient, instant_client

MEASURED = {"wall_s", "batches", "counted_reads", "executed_reads", "events"}
# A slow server and nothing else in the way: 2,000 requests a second.
SLOW_SERVER = Capacity(server_ms=0.5, client_ms=0.0, batch_read_ms=0.0, wire_ms=0.1)


def test_a_queue_serves_in_arrival_order_one_at_a_time():
    q = Queue("server")
    assert [q.serve(0, 10), q.serve(0, 10), q.serve(5, 10), q.serve(100, 10)] == [10, 20, 30, 110]
    assert q.busy == 40 and q.jobs == 4
    two = Queue("server", slots=2)
    assert [two.serve(0, 10), two.serve(0, 10), two.serve(0, 10)] == [10, 10, 20]


def test_queues_sharing_cores_wait_for_a_free_one():
    pool = CorePool(1)
    a, b = Queue("host", pool=pool), Queue("proxy", pool=pool)
    assert a.serve(0, 10) == 10 and b.serve(0, 10) == 20  # one core: the proxy waits for the host's step
    pool2 = CorePool(2)
    c, d = Queue("host", pool=pool2), Queue("proxy", pool=pool2)
    assert c.serve(0, 10) == 10 and d.serve(0, 10) == 10


def test_writes_arriving_during_a_flush_share_the_next_one():
    log = GroupCommit()
    assert log.serve(0, 10) == 10  # the first write flushes at once
    assert log.serve(2, 10) == 20 and log.serve(5, 10) == 20  # both wait for, and share, the next flush
    assert log.serve(30, 10) == 40 and log.flushes == 3


def _client(server: SimServer, resources: Resources, name: str) -> SimZkClient:
    wire = LatencyModel.constant(0.1)
    return SimZkClient(server, sampler=wire.sampler(0, name), recipe_sampler=wire.sampler(0, f"{name}#w"),
                       deliver=lambda callback: None, session_timeout_ms=6000, log_id=name,
                       ids_path="/consumers/g/ids", resources=resources).start()


def test_pipelined_batches_in_flight_queue_at_a_server_of_rate_r():
    """K reads at a server of R reads/s take K/R plus the wire; two members' batches sent at once, 2K/R."""
    k, sched = 40, Scheduler()
    server = SimServer(sched, "g")
    admin = instant_client(server, "admin")
    paths = [f"/consumers/g/ids/m{i}" for i in range(k)]
    for path in paths:
        admin.create(path, b"{}")
    resources = Resources(SLOW_SERVER, 2)
    took: dict[str, int] = {}

    def read(client: SimZkClient) -> None:
        began = sched.now
        assert len(client.get_many(paths)) == k
        took[client.log_id] = sched.now - began

    for name in ("a", "b"):
        sched.spawn(name, functools.partial(read, _client(server, resources, name)))
    sched.run()
    sched.terminate_all()
    service = round(SLOW_SERVER.server_ms * MS) * k
    assert sorted(took.values()) == [service + round(0.1 * MS), 2 * service + round(0.1 * MS)]
    assert server.op_counts()["get_data"] == 2 * k and resources.servers[0].jobs == 2


def test_a_batch_of_k_reads_takes_at_least_k_over_the_servers_rate():
    """With a server of rate R, a pipelined batch of K reads cannot be answered before K/R: one join into 31
    makes 32 members each read 32 registrations, so each attempt's batch holds 32 reads."""
    p = simulate_zk(ZkSimConfig(members=31, capacity=SLOW_SERVER, latency=SLOW_SERVER.wire()))
    assert p.settled and p.conflicts == 0
    # Every request the change counts was served by the one server, counted reads included.
    assert p.busy_s["server"] == pytest.approx(p.requests * SLOW_SERVER.server_ms / 1000, abs=1e-6)
    # The joiner's own attempt alone holds a batch of 32 reads: 16 ms of service before its claims.
    assert p.time_to_stable_s >= 32 * SLOW_SERVER.server_ms / 1000
    # And the whole herd had to pass through the server before the last member owned its partitions: it is the
    # bound, busy nearly all the time.
    used = utilisation(SLOW_SERVER, p.busy_s, p.time_to_stable_s)
    assert max(used, key=used.__getitem__) == "server" and 0.9 <= used["server"] <= 1.0


def test_time_to_stable_grows_super_linearly_once_the_server_saturates():
    """A join costs (N + 1)² + 7(N + 1) + 3P + 3 requests: with a saturated server doubling the group multiplies
    the time by about as much as the requests (2.5x from 16 to 32, 3.2x from 32 to 64)."""
    queued = {n: simulate_zk(ZkSimConfig(members=n, seed=1, capacity=SLOW_SERVER, latency=SLOW_SERVER.wire()))
              for n in (16, 32, 64)}
    assert queued[32].time_to_stable_s > 2.2 * queued[16].time_to_stable_s
    assert queued[64].time_to_stable_s > 2.8 * queued[32].time_to_stable_s
    assert all(p.conflicts == 0 for p in queued.values())  # the growth is the herd's, not backoffs


def test_a_shared_core_is_the_bottleneck_when_every_queue_needs_it():
    one = dataclasses.replace(LAB, cores=1)
    p1 = simulate_zk(ZkSimConfig(members=32, seed=1, capacity=one, latency=one.wire()))
    p2 = simulate_zk(ZkSimConfig(members=32, seed=1, capacity=LAB, latency=LAB.wire()))
    assert p1.busy_s["cores"] == pytest.approx(p2.busy_s["cores"])  # the same work ...
    assert p1.time_to_stable_s > 1.5 * p2.time_to_stable_s  # ... on half the CPUs
    assert p1.time_to_stable_s >= p1.busy_s["cores"] * 0.9


@pytest.mark.parametrize("churn", ["join", "leave"])
def test_with_queues_the_shortcut_still_predicts_what_full_execution_does(churn):
    kwargs = {"members": 16, "churn": churn, "seed": 5, "capacity": LAB, "latency": LAB.wire()}
    full = simulate_zk(ZkSimConfig(shortcut=False, **kwargs)).to_dict()
    short = simulate_zk(ZkSimConfig(shortcut=True, **kwargs)).to_dict()
    assert {k: v for k, v in full.items() if k not in MEASURED} == {k: v for k, v in short.items() if k not in MEASURED}


def test_queued_predictions_are_deterministic_per_seed():
    kwargs = {"members": 12, "capacity": LAB, "latency": LAB.wire()}
    first = simulate_zk(ZkSimConfig(seed=3, **kwargs))
    again = simulate_zk(ZkSimConfig(seed=3, **kwargs))
    other = simulate_zk(ZkSimConfig(seed=4, **kwargs))
    assert (first.time_to_stable_s, first.busy_s, first.requests) == (again.time_to_stable_s, again.busy_s,
                                                                      again.requests)
    assert other.time_to_stable_s != first.time_to_stable_s  # the wire's draws still differ by seed


def test_slow_writes_make_the_joiner_race_the_incumbents_releases():
    """Into a group of one, the incumbent releases all 72 partitions one delete at a time before the joiner's
    half is free, while the joiner reads its offsets and claims: with writes slower than reads (the log's
    fsync, and the server's own work on a write), the joiner claims first and conflicts; with writes as cheap
    as reads it does not."""
    fast = dataclasses.replace(LAB, write_ms=0.0, server_write_ms=None)
    raced = sum(simulate_zk(ZkSimConfig(members=1, seed=s, capacity=LAB, latency=LAB.wire())).conflicts > 0
                for s in range(4))
    calm = sum(simulate_zk(ZkSimConfig(members=1, seed=s, capacity=fast, latency=fast.wire())).conflicts > 0
               for s in range(4))
    assert raced == 4 and calm == 0


def test_profiles_and_validation():
    assert profile(None) is None and profile("lab") is LAB
    with pytest.raises(ValueError, match="unknown capacity profile"):
        profile("datacenter")
    with pytest.raises(ValueError, match=">= 0"):
        Capacity(server_ms=-1, client_ms=0, batch_read_ms=0)
    assert LAB.hosts(1) == 2 and LAB.hosts(257) == 9  # one per core first, then 32 a host
    assert LAB.wire().points("getData")[1 << 15] == pytest.approx(LAB.wire_ms * MS, rel=0.05)
    assert isinstance(LAB.wire(), LatencyModel)


def test_a_sweep_point_names_its_capacity_and_the_row_shows_the_service_given():
    queued = predict(SweepPoint(members=2, seed=0, capacity="lab"))
    free = predict(SweepPoint(members=2, seed=0))
    assert queued["capacity"] == "lab" and free["capacity"] is None and free["zk_server_busy_s"] is None
    assert queued["zk_requests"] == free["zk_requests"] == join_requests(3, 72)  # the queues change time only
    assert queued["zk_server_busy_s"] == pytest.approx(
        (queued["zk_requests"] - queued["zk_create"] - queued["zk_delete"]) * LAB.server_ms / 1000
        + (queued["zk_create"] + queued["zk_delete"]) * LAB.server_write_ms / 1000, abs=1e-6)
    with pytest.raises(ValueError, match="unknown capacity profile"):
        predict(SweepPoint(members=2, capacity="cloud"))
