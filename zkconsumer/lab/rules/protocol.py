"""The protocol rules the lab counts runs by, each defined once: as data, as a Python predicate over one trace
value, and as a Spark ``Column`` built from the same data, so the one-screen summary, the ZooKeeper driver's live
counts, the simulation and the Spark tables cannot count differently.

Imports nothing from the lab: everything that counts imports this. pyspark is imported only by the Column builders,
so a member process or the summary never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rebalance.listener_types import AttemptResult

if TYPE_CHECKING:
    from pyspark.sql import Column

# Kafka group-coordination requests: what a group rebalance costs the broker-side design. Heartbeats are counted
# apart (they grow with time, not with membership changes), as are offset commits and fetches.
COORDINATION_APIS = ("JoinGroup", "SyncGroup", "LeaveGroup")
# The consumer group protocol (KIP-848) has none of those: a member joins (member epoch 0), leaves (-1, or -2 for a
# static member) and acknowledges what it now owns (the request's owned partitions, sent only when they changed)
# in ConsumerGroupHeartbeat requests. Those are its coordination requests; the others are its heartbeats.
GROUP_HEARTBEAT_API = "ConsumerGroupHeartbeat"
HEARTBEAT_APIS = ("Heartbeat", GROUP_HEARTBEAT_API)

# The `result` of an `attempt_end` member event (rebalance/listener_types.py) that ends a rebalance successfully:
# the listener stops retrying on these two (rebalance/listener.py, _attempts). Every other result counts as a
# failed attempt here, including `stopped` (the member closing mid-rebalance) and a missing result, although the
# listener's own stats leave `stopped` out.
SUCCEEDED_RESULTS = (str(AttemptResult.OK), str(AttemptResult.NO_BROKERS))
# The attempt met an owner node held by another member and rolled its claims back (KAFKA-1387's conflict).
CONFLICT_RESULT = str(AttemptResult.CONFLICT)
# Results after which the listener does not sleep rebalance.backoff.ms: the successes, `stopped` (a closing
# member gives up at once) and `view_changed` (an opt-in mode's wait saw the group change: the next attempt starts
# at once, docs/modes.md). Every other result is followed by a backoff and another attempt.
NO_BACKOFF_RESULTS = (*SUCCEEDED_RESULTS, str(AttemptResult.STOPPED), str(AttemptResult.VIEW_CHANGED))


# The wire's categories: what the lab counts of the proxies' `wire` records (docs/analysis.md). A *request* is a
# frame a client sent (kind `request`: ZooKeeper's pings, connects and replies are not requests, nor are Kafka's
# responses); a *notification* is a member told of a change: on ZooKeeper a watch event (kind `event`), on Kafka a
# response that says a rebalance is on (error REBALANCE_IN_PROGRESS: its incumbents hear of a change so) or a
# ConsumerGroupHeartbeat response carrying a new assignment (`assigned` not null: the consumer protocol's only
# notice). Every other wire record has no category.
ZK_PROTO, KAFKA_PROTO = "zk", "kafka"
REQUEST, NOTIFICATION = "request", "notification"
REQUEST_KIND = "request"
ZK_NOTIFICATION_KIND = "event"
KAFKA_RESPONSE_KIND = "response"
REBALANCE_NOTICE = "REBALANCE_IN_PROGRESS"  # the Kafka error code name incumbents are told a rebalance with
TARGET_API = GROUP_HEARTBEAT_API  # its response's `assigned` is not null when it carries a new assignment


def wire_category(proto: str | None, kind: str | None, error_name: str | None = None, api_name: str | None = None,
                  assigned: int | None = None) -> str | None:
    """A wire record's category: REQUEST, NOTIFICATION or None (see above)."""
    if proto == ZK_PROTO:
        return REQUEST if kind == REQUEST_KIND else NOTIFICATION if kind == ZK_NOTIFICATION_KIND else None
    if proto == KAFKA_PROTO:
        if kind == REQUEST_KIND:
            return REQUEST
        if kind == KAFKA_RESPONSE_KIND and (error_name == REBALANCE_NOTICE
                                            or (api_name == TARGET_API and assigned is not None)):
            return NOTIFICATION
    return None


def is_coordination_api(api: str | None) -> bool:
    return api in COORDINATION_APIS


def is_coordination_request(api: str | None, member_epoch: int | None, owned: int | None) -> bool:
    """A request that changes the group or acknowledges a change, on any broker-side protocol (see above)."""
    if api == GROUP_HEARTBEAT_API:
        return (member_epoch is not None and member_epoch <= 0) or owned is not None
    return is_coordination_api(api)


def is_heartbeat(api: str | None, member_epoch: int | None, owned: int | None) -> bool:
    """A liveness request: a classic Heartbeat, or a ConsumerGroupHeartbeat that carries no change."""
    return api in HEARTBEAT_APIS and not is_coordination_request(api, member_epoch, owned)


def is_failed_attempt(result: str | None) -> bool:
    """An `attempt_end` whose result is not a success (None, a record without a result, counts as failed)."""
    return result not in SUCCEEDED_RESULTS


def is_conflict(result: str | None) -> bool:
    return result == CONFLICT_RESULT


def backs_off(result: str | None) -> bool:
    """An `attempt_end` the listener follows with a backoff (a record without a result shows none)."""
    return result is not None and result not in NO_BACKOFF_RESULTS


# --- the same rules as Spark columns ---------------------------------------------------------------------------

def coordination_api_column(api: Column | str) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(_col(api).isin(*COORDINATION_APIS), F.lit(False))


def coordination_request_column(api: Column | str, member_epoch: Column | str, owned: Column | str) -> Column:
    from pyspark.sql import functions as F

    change = F.coalesce(_col(member_epoch) <= 0, F.lit(False)) | _col(owned).isNotNull()
    return F.when(_col(api) == GROUP_HEARTBEAT_API, change).otherwise(coordination_api_column(api))


def wire_category_column(proto: Column | str, kind: Column | str, error_name: Column | str,
                         api_name: Column | str, assigned: Column | str) -> Column:
    """`wire_category` as a column: "request", "notification" or null (a null field as the Python rule takes None)."""
    from pyspark.sql import functions as F

    proto, kind = _col(proto), _col(kind)
    notice = F.coalesce((_col(error_name) == REBALANCE_NOTICE)
                        | ((_col(api_name) == TARGET_API) & _col(assigned).isNotNull()), F.lit(False))
    return (F.when((proto == ZK_PROTO) & (kind == REQUEST_KIND), F.lit(REQUEST))
            .when((proto == ZK_PROTO) & (kind == ZK_NOTIFICATION_KIND), F.lit(NOTIFICATION))
            .when((proto == KAFKA_PROTO) & (kind == REQUEST_KIND), F.lit(REQUEST))
            .when((proto == KAFKA_PROTO) & (kind == KAFKA_RESPONSE_KIND) & notice, F.lit(NOTIFICATION)))


def failed_attempt_column(result: Column | str) -> Column:
    from pyspark.sql import functions as F

    # isin is null on a null result: coalesce it to the Python rule's answer (failed).
    return ~F.coalesce(_col(result).isin(*SUCCEEDED_RESULTS), F.lit(False))


def conflict_column(result: Column | str) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(_col(result) == CONFLICT_RESULT, F.lit(False))


def backs_off_column(result: Column | str) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(~_col(result).isin(*NO_BACKOFF_RESULTS), F.lit(False))


def _col(column: Column | str) -> Column:
    from pyspark.sql import functions as F

    return F.col(column) if isinstance(column, str) else column
