"""Who fetched which partition when: ownership intervals, and what they tell about split brain and latency.

An interval is one member fetching one partition, from the event that started it to the one that ended it:

* ZooKeeper design: `fetchers_started` (the partitions of its `offsets`) to `fetchers_stopped` (its `partitions`).
  A session expiry does not stop this connector's fetchers (they run until the next rebalance stops them), so it
  does not end an interval: it marks it, from the expiry on, as fetching without a registration (`stale_since`).
* Broker-side designs: a generation's `assigned` partitions to their `revoked` or `lost`. Under the incremental
  protocols (cooperative, consumer) an `assigned` record lists the whole assignment and, in `added`, what it
  added: only those start an interval (a kept partition's interval goes on), and a `revoked` record lists only
  what was taken away.
* The original 0.8.2.2 consumer (it reports no per-partition events, owner_nodes.py): its owner node, created
  to deleted as the ZooKeeper proxy saw it on the member's link; a `closeSession` of the member or an `expire`
  of its session (ZooKeeper deletes its ephemeral nodes then) also ends it. `basis` says which kind a row is.
* Every design: a `kill` membership record ends everything the killed member had (a killed process says
  nothing); an interval still open at the run's last record ends there (`end_reason` "trace end").

From the intervals: overlaps between different members on one partition (split brain), the union of coverage
per partition (unowned partition-seconds, convergence) and, per member, the stop-the-world pause from giving its
partitions up to getting some back.

per_run/ownership.py computes every one of these tables, run by run in Python over Arrow; its functions' docstrings
say what each row is. The tests check it against a Spark form written apart (tests/analysis/spark_oracle/).
"""

from __future__ import annotations

START, END = 1, 0  # at one instant an end sorts before a start: a hand-over, not an overlap


STALE_GENERATION = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")  # a coordinator member acting on an old view


# What ends an interval by the member giving the partition up (a kill, the trace's end or a start are not that)
GIVE_UP = ("fetchers_stopped", "revoked", "lost")


