"""Connection losses within a ZooKeeper session, and the requests they cost again (docs/lab.md, "Connection losses").

A member's kazoo connection can drop while its session lives on: kazoo reports SUSPENDED, reconnects with the
same session id and password, and reports CONNECTED. Under the herd this happens when a member's connection
thread starves ("Connection dropped: outstanding heartbeat ping not received"); every request the connection
had not answered fails with ConnectionLoss and is sent again on the new connection. Those requests are on the
wire but not in a join's closed form, so a window with losses is checked as "formula + re-sent after N
connection losses" (identities.zk_join), never silently passed or failed.

Both sides count, over a window [start, end] of one run's trace records:

* **the wire** (the ZooKeeper proxy's records): a *reconnection* is a `connect` record naming an existing session
  (a ConnectRequest with a non-zero session id; a new client sends 0) whose `connect_reply` on the same link and
  connection accepts it (the same session id, a timeout above 0; a timeout of 0 is the server saying the session
  expired). It counts at its reply's time. That connection is a *replacing connection*. The password the
  ConnectRequest carries is never decoded into a record;
* **the members' events** (`member_event` records): a *connection loss* is a `connection` event with state
  `connected` whose member's previous `connection` event was `suspended`, with no `lost` and no
  `session_expired` between (kazoo reports LOST whenever the session did not survive), counted at the
  `connected` event's time;
* **re-sent requests** R: the `resent` events of the members (a request the member's ZooKeeper client sent
  again because its earlier send failed: zkconsumer/zookeeper/client.py, `on_resend`), plus the *re-armed
  watches* on the wire: a read that sets a watch (`watch` true), sent on a replacing connection, that answers no
  notification. kazoo sends no setWatches; its watch recipes (ChildrenWatch, DataWatch) read their node again on
  every reconnection, and a recipe's read the connection lost is retried by kazoo itself, neither through the
  member's client. Each notification of a path to a member is answered by that member's next watched read of the
  path (the re-read of docs/join-cost.md); a watched read that no notification is waiting for is a re-arm when it
  went out on a replacing connection (on a member's first connection it is the watch's installation). A
  notification the member missed because its connection dropped is answered by the recipe's read after the
  reconnection, which therefore is no re-arm. Each re-sent request is one request on the wire that a join without
  losses does not send. A re-sent *create* can meet its own node: the first send reached the server before the
  connection dropped, so ZooKeeper answers the second NodeExists. The member then checks that the node is its own,
  with requests a join without losses does not send either: an owner node's one read
  (operations.create_ephemeral_expect_conflict), a registration's read of its owner and the refresh of its data
  (registration._register). Those follow-ups (`FOLLOW_UPS`) count as re-sent, and such a NodeExists is no owner
  conflict (`refused_owners`: the summary and the analysis take it out of the conflicts that make a join's
  closed form inapplicable).

The wire and the events agree when the reconnections equal the connection losses; a window where they differ
is reported as not attributed (a member that writes no `connection` events, the original 0.8.2.2 consumer, has
its reconnections on the wire only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from zkconsumer.lab.wire.jute import ERRORS

RESENT = "resent"  # the lab member's event kind for one request sent again (members/zk.py)
OWNERS, IDS = "/owners/", "/ids/"
# The requests a member sends after ZooKeeper refuses its re-sent create with NodeExists, by the node's kind: an
# owner node is read once (is it ours?); a registration's owner is read and its data refreshed.
FOLLOW_UPS = {OWNERS: 1, IDS: 2}


@dataclass(frozen=True)
class Reconnects:
    reconnections: int = 0  # on the wire: accepted ConnectRequests that resumed a session
    losses: int = 0  # in the members' events: suspended, then connected in the same session
    resent: int = 0  # the members' `resent` events
    rearmed: int = 0  # watched reads on replacing connections that answer no notification (wire)
    followed: int = 0  # the members' checks of their own node after a re-sent create met it (FOLLOW_UPS)
    refused_owners: int = 0  # owner-node NodeExists answers to re-sent creates: the member's own node, no conflict

    @property
    def re_sent(self) -> int:
        """R: the requests the window sent again because of its connection losses."""
        return self.resent + self.rearmed + self.followed

    @property
    def agree(self) -> bool:
        return self.reconnections == self.losses

    @property
    def any(self) -> bool:
        return bool(self.reconnections or self.losses or self.resent or self.rearmed or self.followed)

    def describe(self) -> str:
        """'2 connection losses, 37 re-sent' (or the disagreement), for one window."""
        if not self.any:
            return "no connection losses"
        text = f"{self.losses} connection loss{'es' if self.losses != 1 else ''}, {self.re_sent} re-sent"
        return text if self.agree else f"{text}; the wire saw {self.reconnections} reconnections: not attributed"


def _inside(ts: Any, start: float | None, end: float | None) -> bool:
    if ts is None:
        return False
    return (start is None or ts >= start) and (end is None or ts <= end)


def _session(value: Any) -> str | None:
    """A session id as text: the lab summary reads it as an int, the Spark reader as the raw JSON text."""
    if value is None or value in ("", 0, "0"):
        return None
    return str(value)


Counted = tuple[float, str, int]  # one counted thing: (its time, the `Reconnects` field it adds to, how much)


def count(records: Iterable[Mapping[str, Any]], start: float | None = None, end: float | None = None, *,
          within: Callable[[float], bool] | None = None) -> Reconnects:
    """The window's reconnections, connection losses and re-sent requests (the module docstring defines each).
    `records` are one run's trace records in any order; the whole run is read so that a member's state before the
    window is known, and only what happens inside [start, end] (or where `within(ts)` holds: the analysis's
    half-open change windows) is counted."""
    return total(counted(records), start, end, within=within)


def total(found: Iterable[Counted], start: float | None = None, end: float | None = None, *,
          within: Callable[[float], bool] | None = None) -> Reconnects:
    """`count`'s window over what `counted` found: one run's records are read once by `counted`, then summed per
    window (the analysis has a window per change)."""
    sums = {f.name: 0 for f in fields(Reconnects)}
    for ts, name, n in found:
        if within(ts) if within is not None else _inside(ts, start, end):
            sums[name] += n
    return Reconnects(**sums)


def counted(records: Iterable[Mapping[str, Any]]) -> list[Counted]:
    """Everything of one run that `count` counts, each at its time, whatever the window."""
    resuming: dict[tuple[Any, Any], str] = {}  # (link, conn) -> the session its ConnectRequest named
    replies: list[Mapping[str, Any]] = []
    watches: list[Mapping[str, Any]] = []  # notifications and watched reads, in the order the proxy saw them
    states: list[Mapping[str, Any]] = []
    refusals: list[Mapping[str, Any]] = []  # NodeExists answers to creates
    recreated: set[tuple[Any, Any]] = set()  # (member, path) of every re-sent create
    found: list[Counted] = []
    for r in records:
        kind = r.get("kind")
        if r.get("type") == "wire" and r.get("proto") == "zk":
            if kind == "connect" and _session(r.get("session_id")) is not None:
                resuming[(r.get("link"), r.get("conn"))] = _session(r.get("session_id"))
            elif kind == "connect_reply":
                replies.append(r)
            elif kind == "event" or (kind == "request" and r.get("watch")):
                watches.append(r)
            elif kind == "reply" and r.get("op") == "create" and ERRORS.get(r.get("err")) == "NodeExists":
                refusals.append(r)
        elif r.get("type") == "member_event":
            if kind in ("connection", "session_expired"):
                states.append(r)
            elif kind == RESENT:
                if r.get("ts") is not None:
                    found.append((r["ts"], "resent", 1))
                if r.get("op") == "create":
                    recreated.add((r.get("member"), r.get("path")))
    replacing = {key for r in replies
                 if (key := (r.get("link"), r.get("conn"))) in resuming and (r.get("timeout_ms") or 0) > 0
                 and _session(r.get("session_id")) == resuming[key]}
    found += [(r["ts"], "reconnections", 1) for r in replies
              if (r.get("link"), r.get("conn")) in replacing and r.get("ts") is not None]
    for r in refusals:
        if (r.get("link"), r.get("path")) in recreated and r.get("ts") is not None:
            found.append((r["ts"], "followed", _follow_ups(r.get("path"))))
            if OWNERS in (r.get("path") or ""):
                found.append((r["ts"], "refused_owners", 1))
    return found + _rearmed(watches, replacing) + _losses(states)


def _follow_ups(path: Any) -> int:
    return next((n for kind, n in FOLLOW_UPS.items() if kind in (path or "")), 0)


def _rearmed(watches: list[Mapping[str, Any]], replacing: set[tuple[Any, Any]]) -> list[Counted]:
    waiting: dict[tuple[Any, Any], int] = {}  # (link, path) -> notifications not yet answered by a watched read
    rearmed: list[Counted] = []
    # a notification before the read it sets off: the proxy stamps frames read in one chunk with one time
    for r in sorted(watches, key=lambda r: (r.get("ts") or 0.0, r.get("kind") != "event")):
        key = (r.get("link"), r.get("path"))
        if r.get("kind") == "event":
            waiting[key] = waiting.get(key, 0) + 1
        elif waiting.get(key):
            waiting[key] -= 1
        elif (r.get("link"), r.get("conn")) in replacing and r.get("ts") is not None:
            rearmed.append((r["ts"], "rearmed", 1))
    return rearmed


def _losses(states: list[Mapping[str, Any]]) -> list[Counted]:
    previous: dict[Any, str] = {}  # member -> its last state: suspended, connected or lost
    losses: list[Counted] = []
    for r in sorted(states, key=lambda r: (r.get("ts") or 0.0, r.get("seq") or 0)):
        member = r.get("member")
        state = "lost" if r.get("kind") == "session_expired" else r.get("state")
        if state == "connected" and previous.get(member) == "suspended" and r.get("ts") is not None:
            losses.append((r["ts"], "losses", 1))
        previous[member] = state
    return losses
