"""The scale sweep as Spark tasks: one task per parameter combination, one row of predictions for both designs.

    df = sweep({"members": [16, 1000, 10000], "churn": ["join", "leave", "crash"]}, spark)

Each combination (N, partitions, latency scale, churn kind, seed, capacity profile) runs `simulate_zk` and the
three broker-side models (`simulate_coordinator`: eager; `simulate_cooperative`; `simulate_consumer_protocol`: the
four curves of docs/simulation.md) in one task (its own Python worker process), largest groups first so two slots
stay busy.
A row holds the predictions per membership change: requests by operation / API, notifications, time to stable,
conflicts, failed attempts, the busiest server's, host's and proxy's service time, and the task's wall time and
peak memory (`ru_maxrss` of the worker: exact per task when workers are not reused, as
`benchmarks/bench_sim.py` runs them).
"""

from __future__ import annotations

import itertools
import os
import resource
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from zkconsumer.lab.sim.capacity import profile
from zkconsumer.lab.sim.consumer_protocol import CONSUMER, simulate_consumer_protocol
from zkconsumer.lab.sim.cooperative import COOPERATIVE, simulate_cooperative
from zkconsumer.lab.sim.coordinator import (
    CoordinatorPrediction,
    CoordinatorSimConfig,
    kafka_latency,
    simulate_coordinator,
)
from zkconsumer.lab.sim.latency import WIRE_OP, LatencyModel
from zkconsumer.lab.sim.zk_sim import ZkSimConfig, simulate_zk

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KAFKA_APIS = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")
# The newer designs' columns: `<design>_<measure>`, design names from designs.py; each model's per-API counts.
NEWER_MODELS = {COOPERATIVE: simulate_cooperative, CONSUMER: simulate_consumer_protocol}
NEWER_APIS = {COOPERATIVE: KAFKA_APIS, CONSUMER: ("FindCoordinator", "ConsumerGroupHeartbeat", "OffsetCommit")}
# Per change, every broker-side design (the eager one's as coord_<measure>): CoordinatorPrediction's fields.
BROKER_MEASURES: tuple[tuple[str, str], ...] = (
    ("heartbeats", "long"), ("noticing_s", "double"), ("rebalancing_s", "double"), ("revoked_kept", "int"),
    ("unowned_partition_s", "double"))


@dataclass(frozen=True)
class SweepPoint:
    members: int  # N: the group before the change
    partitions: int = 72
    latency_scale: float = 1.0  # every round trip multiplied (both designs)
    churn: str = "join"
    seed: int = 101
    shortcut: bool = True
    # A named capacity (capacity.PROFILES, e.g. "lab"): queues at the servers, the proxy and the members' hosts,
    # and the latency tables rescaled to that capacity's network; None: no queueing (the tables as fitted).
    capacity: str | None = None
    # The broker-side designs' session and heartbeat (a run's `[coordinator]`; the consumer protocol's broker gets
    # the same, servers.kraft_settings); None: CoordinatorSimConfig's, the herd scenario's. A prediction compared
    # with a real run must be made with that run's, or it compares different settings (predictions.py).
    heartbeat_interval_ms: int | None = None
    session_timeout_ms: int | None = None


def grid(params_grid: Mapping[str, Iterable[Any]] | Iterable[Mapping[str, Any] | SweepPoint]) -> list[SweepPoint]:
    """A dict of lists (their cartesian product) or an iterable of points/dicts -> the points, without repeats."""
    if isinstance(params_grid, Mapping):
        names = list(params_grid)
        combos: Iterable[Mapping[str, Any] | SweepPoint] = (
            dict(zip(names, values, strict=True)) for values in itertools.product(*(params_grid[n] for n in names)))
    else:
        combos = params_grid
    known = {f.name for f in fields(SweepPoint)}
    points = []
    for combo in combos:
        if isinstance(combo, SweepPoint):
            points.append(combo)
            continue
        unknown = set(combo) - known
        if unknown:
            raise ValueError(f"unknown sweep parameter(s) {sorted(unknown)}; known: {sorted(known)}")
        points.append(SweepPoint(**combo))
    return list(dict.fromkeys(points))


def _column(op: str) -> str:
    """getData -> get_data, FindCoordinator -> find_coordinator."""
    return "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_")


ZK_OPS = tuple(WIRE_OP.values())
ROW_FIELDS: tuple[tuple[str, str], ...] = (
    ("members", "int"), ("partitions", "int"), ("latency_scale", "double"), ("churn", "string"), ("seed", "int"),
    ("shortcut", "boolean"), ("heartbeat_interval_ms", "int"), ("session_timeout_ms", "int"),
    ("zk_requests", "long"), *((f"zk_{_column(op)}", "long") for op in ZK_OPS), ("zk_notifications", "long"),
    ("zk_accounted_requests", "long"), ("zk_time_to_stable_s", "double"), ("zk_settled", "boolean"),
    ("zk_rebalances", "int"), ("zk_attempts", "int"), ("zk_failed_attempts", "int"), ("zk_conflicts", "int"),
    ("zk_failures", "int"), ("zk_partitions_moved", "int"), ("zk_counted_reads", "long"),
    ("zk_executed_reads", "long"),
    ("coord_requests", "long"), ("coord_coordination", "long"),
    *((f"coord_{_column(api)}", "long") for api in KAFKA_APIS),
    ("coord_time_to_stable_s", "double"), ("coord_settled", "boolean"), ("coord_generations", "int"),
    ("coord_partitions_moved", "int"),
    ("zk_wall_s", "double"), ("coord_wall_s", "double"), ("peak_rss_mb", "double"),
    ("capacity", "string"), ("zk_server_busy_s", "double"), ("zk_host_busy_s", "double"),
    ("zk_proxy_busy_s", "double"),
    *((f"coord_{name}", kind) for name, kind in BROKER_MEASURES),
    *(column for design, apis in NEWER_APIS.items() for column in (
        (f"{design}_requests", "long"), (f"{design}_coordination", "long"),
        *((f"{design}_{_column(api)}", "long") for api in apis),
        (f"{design}_time_to_stable_s", "double"), (f"{design}_settled", "boolean"), (f"{design}_rounds", "int"),
        (f"{design}_partitions_moved", "int"), *((f"{design}_{name}", kind) for name, kind in BROKER_MEASURES),
        (f"{design}_wall_s", "double"))),
)
# The columns that measure the task itself (its wall time and peak memory), not the simulated group: they differ
# from run to run, so a comparison of two sweeps' results leaves them out.
TASK_MEASURES: tuple[str, ...] = (*(name for name, _ in ROW_FIELDS if name.endswith("_wall_s")), "peak_rss_mb")


def predict(point: SweepPoint) -> dict[str, Any]:
    """Both designs for one combination, as one flat row (`ROW_FIELDS`)."""
    capacity = profile(point.capacity)
    latency = LatencyModel(scale=point.latency_scale) if capacity is None else capacity.wire(point.latency_scale)
    zk = simulate_zk(ZkSimConfig(members=point.members, partitions=point.partitions, churn=point.churn,
                                 seed=point.seed, latency=latency, shortcut=point.shortcut, capacity=capacity))
    broker = CoordinatorSimConfig(members=point.members, partitions=point.partitions, churn=point.churn,
                                  seed=point.seed, latency=kafka_latency(scale=point.latency_scale),
                                  **broker_settings(point.heartbeat_interval_ms, point.session_timeout_ms))
    began = time.perf_counter()
    co = simulate_coordinator(broker)
    coord_wall_s = round(time.perf_counter() - began, 3)
    newer = {design: model(broker) for design, model in NEWER_MODELS.items()}
    row: dict[str, Any] = {**asdict(point), "zk_requests": zk.requests, "zk_notifications": zk.notifications,
                           "zk_accounted_requests": zk.accounted_requests, "zk_time_to_stable_s": zk.time_to_stable_s,
                           "zk_settled": zk.settled, "zk_rebalances": zk.rebalances, "zk_attempts": zk.attempts,
                           "zk_failed_attempts": zk.failed_attempts, "zk_conflicts": zk.conflicts,
                           "zk_failures": zk.failures, "zk_partitions_moved": zk.partitions_moved,
                           "zk_counted_reads": zk.counted_reads,
                           "zk_executed_reads": zk.executed_reads, "zk_wall_s": zk.wall_s,
                           "zk_server_busy_s": zk.busy_s.get("server"), "zk_host_busy_s": zk.busy_s.get("host"),
                           "zk_proxy_busy_s": zk.busy_s.get("proxy")}
    for op in ZK_OPS:
        row[f"zk_{_column(op)}"] = zk.requests_by_op.get(op, 0)
    row.update(coord_requests=sum(co.requests_by_api.values()), coord_coordination=co.coordination,
               coord_time_to_stable_s=co.time_to_stable_s, coord_settled=co.settled,
               coord_generations=co.generations, coord_partitions_moved=co.partitions_moved,
               coord_wall_s=coord_wall_s,
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    for api in KAFKA_APIS:
        row[f"coord_{_column(api)}"] = co.requests_by_api.get(api, 0)
    row.update(_measures("coord", co))
    for design, p in newer.items():
        row.update({f"{design}_requests": sum(p.requests_by_api.values()), f"{design}_coordination": p.coordination,
                    f"{design}_time_to_stable_s": p.time_to_stable_s, f"{design}_settled": p.settled,
                    f"{design}_rounds": p.generations, f"{design}_partitions_moved": p.partitions_moved,
                    f"{design}_wall_s": p.wall_s, **_measures(design, p)})
        for api in NEWER_APIS[design]:
            row[f"{design}_{_column(api)}"] = p.requests_by_api.get(api, 0)
    return {name: row[name] for name, _ in ROW_FIELDS}


def broker_settings(heartbeat_interval_ms: int | None, session_timeout_ms: int | None) -> dict[str, int]:
    """CoordinatorSimConfig's keywords for the settings given (those left None keep the config's defaults)."""
    given = {"heartbeat_interval_ms": heartbeat_interval_ms, "session_timeout_ms": session_timeout_ms}
    return {name: value for name, value in given.items() if value is not None}


def _measures(prefix: str, p: CoordinatorPrediction) -> dict[str, Any]:
    return {f"{prefix}_{name}": getattr(p, name) for name, _ in BROKER_MEASURES}


def schema() -> Any:
    from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

    types = {"int": IntegerType(), "long": LongType(), "double": DoubleType(), "string": StringType(),
             "boolean": BooleanType()}
    return StructType([StructField(name, types[kind], nullable=True) for name, kind in ROW_FIELDS])


def local_session(cores: int = 2, *, reuse_workers: bool = True, master: str | None = None) -> SparkSession:
    """A `local[cores]` session, or one on `master` (a cluster's URL, e.g. spark://host:7077), whose Python
    workers run this interpreter (the one with this project and its dependencies; Spark's default is whatever
    `python3` is on PATH) unless PYSPARK_PYTHON names another. `reuse_workers=False` gives each task a fresh
    worker process, so a row's `peak_rss_mb` is that task's own peak."""
    from pyspark.sql import SparkSession

    # nothing of Spark listens beyond loopback unless SPARK_LOCAL_IP says otherwise
    from zkconsumer.lab.analysis.local_spark import configure_driver, driver_java_options

    session = configure_driver(SparkSession.builder.master(master or f"local[{cores}]").appName("zkconsumer-sim")
                               .config("spark.driver.extraJavaOptions", driver_java_options())
                               .config("spark.python.worker.reuse", str(reuse_workers).lower())
                               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                               .config("spark.sql.shuffle.partitions", str(cores))).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def sweep(params_grid: Mapping[str, Iterable[Any]] | Iterable[Mapping[str, Any] | SweepPoint],
          spark: SparkSession, *, tasks: int | None = None) -> DataFrame:
    """One Spark task per combination, or `tasks` tasks sharing them (`share`); returns a DataFrame with one row
    per combination (`ROW_FIELDS`), in the order the tasks are scheduled: largest groups first. It is not sorted
    by Spark: a sort samples its input in a job of its own, which would run every simulation twice.

    A task of its own per combination keeps a row's `peak_rss_mb` that combination's (with `reuse_workers=False`,
    as benchmarks/bench_sim.py runs it); a few tasks sharing many small combinations spare a local session the
    tens of milliseconds each task costs to schedule and hand to a Python worker, which for small groups is more
    than the simulation (the analysis job's predictions, predictions.py).

    The tasks are a map over Arrow (`mapInArrow`) of one row per task, its index into the shares: the same
    Python workers as the analysis's grouped maps, already started, where an RDD of points would start a second
    set (PySpark keys its worker daemons by the runner's environment, and the RDD's differs from SQL's;
    docs/analysis.md measures the difference)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    points = sorted(grid(params_grid), key=lambda p: (-p.members, -p.partitions, p.churn, p.latency_scale, p.seed))
    if not points:
        raise ValueError("an empty sweep")
    if tasks is not None and tasks < 1:
        raise ValueError(f"a sweep needs at least one task, not {tasks}")
    # The workers must run this interpreter (it has the project and its dependencies), or the one PYSPARK_PYTHON
    # names (a cluster's workers may keep it elsewhere); PySpark reads the attribute when a job is submitted, so
    # this also fixes a session started with another `python3`.
    spark.sparkContext.pythonExec = os.environ.get("PYSPARK_PYTHON") or sys.executable
    shares = [[p] for p in points] if tasks is None or tasks >= len(points) else share(points, tasks)
    spark_schema = schema()
    arrow_schema = to_arrow_schema(spark_schema)

    def simulate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pylist([predict(p) for p in shares[task]], schema=arrow_schema)

    return spark.range(0, len(shares), 1, len(shares)).mapInArrow(simulate, spark_schema)


def share(points: list[SweepPoint], tasks: int) -> list[list[SweepPoint]]:
    """The points dealt to `tasks` tasks of about equal cost, largest first to the least loaded (the LPT rule),
    the cost of a point taken as its group size plus one (the simulation's work grows with the members; the one
    is a point's own setting up). Each task's points stay largest first; tasks with the largest cost first."""
    loads: list[tuple[int, list[SweepPoint]]] = [(0, []) for _ in range(tasks)]
    for point in points:  # already largest first
        least = min(range(tasks), key=lambda i: (loads[i][0], i))
        cost, held = loads[least]
        loads[least] = (cost + point.members + 1, [*held, point])
    return [held for _, held in sorted(loads, key=lambda load: -load[0]) if held]
