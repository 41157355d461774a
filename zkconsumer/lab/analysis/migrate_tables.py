"""The `migrate` scenario's tables: what rolling a ZooKeeper-design group to the coordinator design cost.

A migrate run (docs/migrate.md) is a run with `membership` records of action `migrate`: member k stopped cleanly
and a coordinator-design member of the same group id started in its place. Step k's **window** runs from its
record to step k+1's (the last one to the run's last record), so every record after the first step belongs to
exactly one window:

* `duplicates`: consumptions of an offset already consumed earlier in the run (the second and later ones, each
  counted in the window it happened in), as the fault campaign counts them (chaos_tables.py);
* `dead_time_s`: the time the group consumed nothing: the longest stretch between two consecutive `consume`
  records of the whole group (any member, any partition) that ends inside the window. A stretch that began before
  the step counts whole: it runs from the last message consumed before the step to the first one after.
  `dead_from` and `dead_to` are its ends. Coordinator members write what a `poll()` returned at most 0.2 s late
  (coordinator_member.FLUSH_S), so on their side a stretch can read up to that much long;
* `partition_stall_s`: the longest time inside the window that one partition had messages waiting and none was
  consumed (the fault campaign's dead time, chaos_tables._stalls), the maximum over partitions.

`migrate_totals` has one row per run: produced and the delivery audit's duplicates and missing offsets over the
whole run and every partition (delivery.py), the duplicates before the first step, and the dead time summed over
the steps. `migrate_partitions` is the delivery audit's per-partition rows of the migrate runs.

per_run/migrate.py computes the three tables of a run in Python over Arrow. The tests check it against a Spark form
written apart (tests/analysis/spark_oracle/migrate_tables.py).
"""

from __future__ import annotations

MIGRATE = "migrate"  # the `membership` action of a migrate step (zkconsumer/lab/runs/case_run.py)
MIGRATE_TABLES = ("migrate_steps", "migrate_totals", "migrate_partitions")


