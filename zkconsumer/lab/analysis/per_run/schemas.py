"""The per-run tables' Spark schemas, as the job writes them (docs/analysis.md lists what each column means).

Declared as column lists ("name type, ..."), the form Spark prints them in; `schema` reads the few types the
tables use. The grouped map's output (run.py) and each table's Arrow rows are made from these, on the executors
too, where there is no JVM to parse a DDL string.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

_TYPES: dict[str, T.DataType] = {"string": T.StringType(), "int": T.IntegerType(), "bigint": T.LongType(),
                                 "double": T.DoubleType(), "boolean": T.BooleanType(),
                                 "array<bigint>": T.ArrayType(T.LongType())}
_PYTHON = {T.StringType: str, T.IntegerType: int, T.LongType: int, T.DoubleType: float, T.BooleanType: bool}


def schema(columns: str) -> T.StructType:
    """"name type, name type, ..." as a StructType (every field nullable)."""
    fields = []
    for column in columns.split(","):
        name, kind = column.split()
        if kind not in _TYPES:
            raise ValueError(f"type {kind!r} of column {name!r}: schema() reads only {', '.join(_TYPES)}")
        fields.append(T.StructField(name, _TYPES[kind]))
    return T.StructType(fields)


def conform(row: dict[str, Any], of: T.StructType) -> dict[str, Any]:
    """`row` with exactly `of`'s columns, in its order, each value of the column's Python type (a count summed as
    a float becomes an int, a 0 filled into a double column a float); a missing column is None."""
    out = {}
    for field in of.fields:
        value = row.get(field.name)
        kind = _PYTHON.get(type(field.dataType))
        out[field.name] = value if value is None or kind is None else kind(value)
    return out


WIRE_COUNTS = schema(
    "run_id string, design string, change_index int, member string, proto string, category string, op "
    "string, code int, coordination boolean, count bigint")
REBALANCES = schema(
    "run_id string, design string, change_index int, member string, rebalances bigint, attempts bigint, "
    "failed_attempts bigint, conflicts bigint, owner_conflicts bigint, rebalance_failures bigint, "
    "session_expiries bigint, assignments bigint, revocations bigint, losses bigint, generations "
    "array<bigint>")
OWNERSHIP_INTERVALS = schema(
    "run_id string, design string, member string, tp string, topic string, partition int, start double, "
    "end double, length_s double, end_reason string, open_at_end boolean, stale_since double, basis "
    "string")
OVERLAPS = schema(
    "run_id string, design string, tp string, member_a string, member_b string, start double, end double, "
    "after_expiry boolean, overlap_s double, change_index int")
STOP_THE_WORLD = schema(
    "run_id string, design string, member string, stopped_ts double, restarted_ts double, pause_s double, "
    "partitions_before bigint, partitions_after bigint, change_index int")
CONTENTION = schema(
    "run_id string, design string, member string, ts double, what string, tp string")
CHANGES = schema(
    "run_id string, change_index int, design string, change_number int, action string, change_members "
    "string, step int, weight int, counted int, change_ts double, window_start double, window_end double, "
    "stable_s double, stable_ts double, scenario string, case string, process_mode string, members int, "
    "zk_requests bigint, zk_notifications bigint, kafka_requests bigint, kafka_coordination bigint, "
    "kafka_heartbeats bigint, rebalance_notices bigint, rebalances bigint, attempts bigint, "
    "failed_attempts bigint, conflicts bigint, rebalance_failures bigint, session_expiries bigint, "
    "revocations bigint, losses bigint, owner_conflicts bigint, unowned_partition_s double, convergence_s "
    "double, n_partitions bigint, overlaps bigint, overlap_s double, pauses bigint, max_pause_s double, "
    "median_pause_s double, noticing_s double, rebalancing_s double, noticed_by bigint, partitions_moved "
    "bigint, revoked_kept bigint, rounds int, zk_reconnections bigint, connection_losses bigint, "
    "resent_requests bigint, resent_refused_owners bigint")
RUNS = schema(
    "run_id string, path string, scenario string, case string, design string, process_mode string, repeat "
    "int, sweep_axis string, sweep_value double, members int, partitions int, session_timeout_ms int, "
    "servers string, completed boolean, status string, started double, ended double, churn_start double, "
    "churn_end double, run_end double, changes int, membership_records int, time_to_stable_s double, "
    "median_stable_s double, stable_records int, zk_requests bigint, zk_notifications bigint, "
    "kafka_requests bigint, kafka_coordination bigint, kafka_heartbeats bigint, rebalance_notices bigint, "
    "rebalances bigint, attempts bigint, failed_attempts bigint, conflicts bigint, rebalance_failures "
    "bigint, session_expiries bigint, revocations bigint, losses bigint, owner_conflicts bigint, overlaps "
    "bigint, overlap_s double, max_overlap_s double, median_pause_s double, max_pause_s double, "
    "unowned_partition_s double, max_convergence_s double, unconverged_changes bigint, expected_basis "
    "string, consumed_offsets bigint, duplicates bigint, missing bigint, trace_lines bigint, bad_lines "
    "bigint, partitions_moved bigint, revoked_kept bigint, join_group_requests bigint, "
    "sync_group_requests bigint, leave_group_requests bigint, find_coordinator_requests bigint, "
    "epoch_zero_heartbeats bigint, revoked_partitions bigint, rounds int, zk_requests_per_change double, "
    "zk_notifications_per_change double, kafka_requests_per_change double, kafka_coordination_per_change "
    "double, kafka_heartbeats_per_change double, rebalance_notices_per_change double, "
    "partitions_moved_per_change double, revoked_kept_per_change double, noticing_s double, rebalancing_s "
    "double, undecodable_streams bigint, blackholed_requests bigint, counting_gaps string, zk_reconnections "
    "bigint, connection_losses bigint, resent_requests bigint, resent_requests_per_change double, "
    "resent_refused_owners bigint")
MIGRATE_STEPS = schema(
    "run_id string, step int, member string, start_ts double, window_end double, produced bigint, "
    "consumed bigint, duplicates bigint, dead_time_s double, dead_from double, dead_to double, "
    "partition_stall_s double")
MIGRATE_TOTALS = schema(
    "run_id string, produced bigint, duplicates bigint, missing bigint, partitions bigint, steps bigint, "
    "dead_time_s double, max_dead_time_s double, partition_stall_s double, duplicates_before bigint")
