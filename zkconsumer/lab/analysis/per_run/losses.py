"""Connection losses within a ZooKeeper session, per change window and over the churn: the wire's reconnections,
the members' losses and the requests re-sent after them (zkconsumer/lab/rules/reconnects.py defines each; the lab
summary
counts the same from the same records).

Only the few records the definitions read are taken out of the run as dicts: the members' `connection`,
`session_expired` and `resent` events, and the ZooKeeper proxy's `connect` and `connect_reply` records, its
watch notifications, the reads that set a watch and the NodeExists answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zkconsumer.lab.analysis.owner_nodes import NODE_EXISTS
from zkconsumer.lab.analysis.per_run.core import equals, in_window, is_in, picked
from zkconsumer.lab.rules import reconnects

Row = dict[str, Any]
COLUMNS = ("zk_reconnections", "connection_losses", "resent_requests", "resent_refused_owners")
_READ = ["type", "proto", "kind", "ts", "link", "conn", "session_id", "timeout_ms", "op", "path", "watch", "member",
         "state", "err"]


def _records(run: pa.Table) -> list[Row]:
    events = pc.and_kleene(equals(run, "type", "member_event"),
                           is_in(run, "kind", ("connection", "session_expired", reconnects.RESENT)))
    watched = pc.and_kleene(equals(run, "kind", "request"), pc.fill_null(run["watch"], False))
    refused = pc.and_kleene(equals(run, "kind", "reply"), pc.equal(run["err"], NODE_EXISTS))
    wire = pc.and_kleene(pc.and_kleene(equals(run, "type", "wire"), equals(run, "proto", "zk")),
                         pc.or_kleene(pc.or_kleene(is_in(run, "kind", ("connect", "connect_reply", "event")), watched),
                                      refused))
    return picked(run, pc.or_kleene(pc.fill_null(events, False), pc.fill_null(wire, False)), _READ)


def _row(found: reconnects.Reconnects) -> Row:
    return {"zk_reconnections": found.reconnections, "connection_losses": found.losses,
            "resent_requests": found.re_sent, "resent_refused_owners": found.refused_owners}


def connection_losses(run: pa.Table, windows: Sequence[Row], bounds: Row | None) -> tuple[dict[int, Row], Row | None]:
    """(per change index, over the churn window [churn_start, churn_end]): `COLUMNS` of each."""
    # the run's records are read once, then summed per window: a herd has a window per change
    found = reconnects.counted(_records(run))
    per_change = {w["change_index"]: _row(reconnects.total(found, within=lambda t, w=w: in_window(t, w)))
                  for w in windows}
    if bounds is None or bounds.get("churn_start") is None:
        return per_change, None
    return per_change, _row(reconnects.total(found, bounds["churn_start"], bounds.get("churn_end")))
