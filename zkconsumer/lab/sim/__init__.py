"""The scale simulation: what one machine cannot run for real (groups up to N = 10,000), for both designs.

* ZooKeeper design (`simulate_zk`): this project's own connector, listener, ownership, offsets and assignors,
  executed over the in-memory ZooKeeper on a virtual clock (scheduler.py, zk_env.py, zk_members.py; the product
  takes the simulation's locks, events and threads through its `sync=` seam: virtual_sync.py), with an
  identical-view shortcut for the M² registration reads at large N (views.py).
* Coordinator design (`simulate_coordinator`): a model of Apache Kafka's GroupCoordinator (coordinator.py), and
  the newer protocols on the same clock: cooperative-sticky (`simulate_cooperative`, cooperative.py) and the
  consumer group protocol (`simulate_consumer_protocol`, consumer_protocol.py).
* Latencies: per-operation distributions fitted from lab wire records (latency.py, calibrate.py).
* Capacity: the servers, the lab's proxy and the members' hosts as queues with measured service times
  (capacity.py; `ZkSimConfig.capacity`, `SweepPoint.capacity`); which of them bounds a change (bounds.py).
* `sweep(params_grid, spark)`: one Spark task per parameter combination (sweep.py).

docs/simulation.md says what is executed, what is counted, and how the results compare with real lab runs.
"""

from zkconsumer.lab.sim.capacity import Capacity, profile
from zkconsumer.lab.sim.consumer_protocol import simulate_consumer_protocol
from zkconsumer.lab.sim.cooperative import simulate_cooperative
from zkconsumer.lab.sim.coordinator import CoordinatorPrediction, CoordinatorSimConfig, simulate_coordinator
from zkconsumer.lab.sim.latency import LatencyModel
from zkconsumer.lab.sim.scheduler import Scheduler, SimulationError
from zkconsumer.lab.sim.sweep import ROW_FIELDS, SweepPoint, grid, local_session, predict, sweep
from zkconsumer.lab.sim.zk_sim import ZkPrediction, ZkSimConfig, simulate_zk

__all__ = [
    "ROW_FIELDS",
    "Capacity",
    "CoordinatorPrediction",
    "CoordinatorSimConfig",
    "LatencyModel",
    "Scheduler",
    "SimulationError",
    "SweepPoint",
    "ZkPrediction",
    "ZkSimConfig",
    "grid",
    "local_session",
    "predict",
    "profile",
    "simulate_consumer_protocol",
    "simulate_cooperative",
    "simulate_coordinator",
    "simulate_zk",
    "sweep",
]
