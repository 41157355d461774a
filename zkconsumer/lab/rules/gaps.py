"""Counting gaps: what the lab knows it did not count, so that a run's counts are never silently short.

Three things leave a run's counts incomplete, and each is counted per run (the lab summary, the Spark `runs` table,
the report):

- an **undecodable stream**: a proxy that cannot decode a connection's bytes records `undecodable` once and forwards
  the rest blind (zkconsumer/lab/wire/connection.py), so nothing more of that connection is counted;
- a **request into a blackhole**: a frame a client sent over a link cut with `blackhole` is decoded and recorded
  (`dropped`), but never reaches the server, so its reply never comes: the request is counted, its reply, its
  latency and whatever the server would have done are not. A scenario that cuts a link on purpose expects them:
  they are a gap in the counts, not an error of the run;
- a **bad trace line**: a line a reader skipped (a torn last line of a killed member, a garbled line, a record
  that does not follow the schema), whose record is lost to every count.

docs/traces.md lists them with the fields they come from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Frames a client sends: a dropped one is a request that never reached the server (ZooKeeper: the handshake,
# requests and pings; Kafka: requests).
CLIENT_KINDS = ("connect", "request", "ping")


def is_undecodable(record: Mapping[str, Any]) -> bool:
    return record.get("type") == "wire" and record.get("kind") == "undecodable"


def is_blackholed_request(record: Mapping[str, Any]) -> bool:
    return record.get("type") == "wire" and bool(record.get("dropped")) and record.get("kind") in CLIENT_KINDS


# Each gap's count and its words, singular and plural: what the summary, the Spark `runs` table and the report say.
WORDS = (("undecodable", "undecodable stream", "undecodable streams"),
         ("blackholed", "request into a blackhole", "requests into a blackhole"),
         ("bad_lines", "bad trace line", "bad trace lines"))


def reasons(undecodable: int, blackholed: int, bad_lines: int) -> list[str]:
    """Each gap a run has, as a phrase ("2 undecodable streams"); empty when its counts are complete."""
    counts = {"undecodable": undecodable, "blackholed": blackholed, "bad_lines": bad_lines}
    return [f"{counts[key]} {one if counts[key] == 1 else many}" for key, one, many in WORDS if counts[key]]


def describe(undecodable: int, blackholed: int, bad_lines: int) -> str | None:
    """The gaps as one reason ("2 undecodable streams, 5 requests into a blackhole"), or None."""
    return ", ".join(reasons(undecodable, blackholed, bad_lines)) or None


def countable(run: Mapping[str, Any]) -> bool:
    """A run whose counts can be compared with anything: it completed and nothing it did escaped the count. A
    prediction or a verdict built on a run with a gap would compare a number that is short by construction."""
    return bool(run.get("completed")) and not run.get("counting_gaps")
