"""The coordinator design's steps: the group state machine, derived from the wire, and each member's view.

The broker's group state is not on the wire (only a DescribeGroups would ask for it, and no member sends one)
and trace schema v1 has no record for it, so the state is derived from the Kafka proxy's records, following
Apache Kafka's `GroupCoordinator` (classic protocol; docs/coordinator.md, docs/lesson.md):

* Empty until the first member joins; a LeaveGroup of the last member makes it Empty again.
* PreparingRebalance when a JoinGroup arrives that the coordinator must wait on: any JoinGroup except one
  answered MEMBER_ID_REQUIRED (KIP-394's handshake, which adds no member), or a LeaveGroup, or the first
  Heartbeat answered REBALANCE_IN_PROGRESS (the coordinator began one on its own, e.g. a session expired).
* CompletingRebalance at the first JoinGroup answered without error: `onCompleteJoin` starts the next
  generation. Its number is the answer's GenerationId as the proxy decoded it (`epoch_after`, docs/wire.md),
  else the one the member reports next in its `generation` record (Kafka counts from 1).
* Stable once every member answered for that generation has its SyncGroup answered without error and no
  JoinGroup is pending. Kafka turns Stable at the leader's SyncGroup (`doSyncGroup`), answering the followers'
  syncs parked until then at once and later ones on arrival; which member leads is not on the proxy's records
  (response bodies are only checked for errors), and waiting for every sync is also the moment each member
  holds its assignment.
* A SyncGroup answered REBALANCE_IN_PROGRESS sends the group back to PreparingRebalance.

Members' own records give the assignments (assigned, revoked, lost). The cooperative design (coop_steps.py) is
the same protocol and reuses all of this; its members revoke only what moves (`remaining` keeps the rest).
"""

from __future__ import annotations

from typing import Any

from zkconsumer.lab.lesson.model import Step, code_ref, partition_order
from zkconsumer.lab.lesson.replay import Replay, Window, members_in
from zkconsumer.lab.members.coordinator import CoordinatorMember
from zkconsumer.lab.rules.protocol import is_coordination_request, is_heartbeat
from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.runs.stability import ChangeTracker
from zkconsumer.lab.sim.coordinator import COMPLETING, EMPTY, PREPARING, STABLE, _Model

GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "FindCoordinator")
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 79, 27, 25

# api -> (code that models it, Kafka source, explanation)
APIS: dict[str, tuple[Any, str, str]] = {
    "FindCoordinator": (_Model.find_coordinator, "KafkaApis.handleFindCoordinatorRequest",
                        "which broker coordinates this group: one broker, not an ensemble every member watches"),
    "JoinGroup": (_Model.on_join, "GroupCoordinator.handleJoinGroup / prepareRebalance",
                  "the coordinator holds each JoinGroup until every known member has rejoined"),
    "SyncGroup": (_Model.on_sync, "GroupCoordinator.doSyncGroup",
                  "the leader sends the assignment it computed; every member gets its own share back"),
    "Heartbeat": (_Model.on_heartbeat, "GroupCoordinator.handleHeartbeat",
                  "heartbeats keep the session alive and are how incumbents learn of a rebalance"),
    "LeaveGroup": (_Model.on_leave, "GroupCoordinator.handleLeaveGroup / removeMemberAndUpdateGroup",
                   "a graceful leave: the coordinator starts a rebalance at once, no session timeout"),
    "OffsetCommit": (_Model.rejoin, "GroupCoordinator.handleCommitOffsets (ConsumerCoordinator.onJoinPrepare)",
                     "before giving its partitions up a member commits what it consumed"),
    "OffsetFetch": (_Model.on_sync, "GroupCoordinator.handleFetchOffsets",
                    "where to resume each newly assigned partition"),
}


class CoordinatorSteps:
    # the Kafka APIs whose records become steps (or counts)
    SHOWN_APIS: tuple[str, ...] = GROUP_APIS

    def __init__(self, records: list[dict[str, Any]], window: Window, design: str = "coordinator") -> None:
        self.design = design
        self.records = records
        self.members = members_in(records)
        self.partitions = sorted({p for r in records if r["type"] in ("generation", "assignment")
                                  for p in r.get("partitions", ())}, key=partition_order)
        self.replay = Replay(design, window, self.initial_state())
        self.replay.counter("coordination", "coordination requests")
        self.replay.counter("heartbeats", "heartbeats")
        self.add_counters()
        self.responses = _pair(records)
        self.next_generation = _next_generations(records)
        # member -> the generation its latest JoinGroup answer put it in (librdkafka's records carry none)
        self.joined: dict[str, int | None] = {}

    def initial_state(self) -> dict[str, Any]:
        return {"group": {"state": EMPTY, "generation": None},
                "members": {m: {"phase": "not started", "generation": None, "partitions": []}
                            for m in self.members}, "pending_join": [], "awaiting_sync": []}

    def add_counters(self) -> None:
        self.replay.counter("notifications", "rebalance notifications")

    def build(self) -> tuple[dict[str, Any], list[Step]]:
        for r in self.records:
            if r["type"] == "wire" and r.get("proto") == "kafka" and r.get("api_name") in self.SHOWN_APIS:
                self._wire(r)
            elif r["type"] == "generation":
                self._generation(r)
            elif r["type"] == "membership":
                self._membership(r)
            elif r["type"] == "stable":
                self._step(r, "stable", f"group stable again, {r['duration_s']:.2f} s after the change",
                           "every live member holds an assignment of one generation, together covering all",
                           ChangeTracker.track, "—")
        return self.replay.finish(self._derive)

    def _derive(self, state: dict[str, Any]) -> dict[str, Any]:
        owned = {p for m in state["members"].values() for p in m["partitions"]}
        unowned = [p for p in self.partitions if p not in owned]
        return {"partitions": self.partitions, "unowned": unowned,
                "counters": {**state["counters"], "partitions unowned": len(unowned)}}

    def _step(self, r: dict[str, Any], kind: str, title: str, explain: str, target: Any, kafka: str,
              mutation=None, **extra: Any) -> None:
        self.replay.add(r["ts"], Step(self.design, 0.0, kind, title, explain, code_ref(target), kafka, **extra),
                        mutation)

    def _membership(self, r: dict[str, Any]) -> None:
        action, names = r["action"], r["members"]

        def apply(state: dict[str, Any]) -> None:
            for name in names:
                member = state["members"].setdefault(name, {"generation": None, "partitions": []})
                member["phase"] = {"join": "starting", "kill": "killed", "leave": "leaving",
                                   "pause": "paused"}.get(action, member.get("phase"))

        explain = {"kill": "kill -9: the coordinator notices only when the member's session times out",
                   "join": "a new consumer starts: it finds the coordinator and asks to join"}.get(
            action, "the orchestrator acts")
        self._step(r, "change", f"membership change: {action} {', '.join(names)}", explain, CaseRun._apply, "—",
                   apply, member=names[0] if names else None)

    def _wire(self, r: dict[str, Any]) -> None:
        api, member = r["api_name"], r.get("client_id") or r.get("link")
        key = (r.get("link"), r.get("conn"), r.get("correlation_id"))
        if r["kind"] == "request":
            epoch, owned = r.get("member_epoch"), r.get("owned")
            if is_heartbeat(api, epoch, owned):
                self.replay.count("heartbeats", r["ts"])
            elif is_coordination_request(api, epoch, owned):
                self.replay.count("coordination", r["ts"])
                # the others are shown with their answer
                self._request(r, api, member, self.responses.get(key))
        elif r["kind"] == "response":
            self._response(r, api, member)

    def _request(self, r: dict[str, Any], api: str, member: str, response: dict[str, Any] | None) -> None:
        target, kafka, explain = APIS[api]
        if api == "JoinGroup" and response is not None and response.get("error_code") == MEMBER_ID_REQUIRED:
            return  # shown with its answer: the handshake that gives a new member its id
        apply = None
        if api == "JoinGroup":
            def apply(state: dict[str, Any]) -> None:
                group = state["group"]
                if group["state"] in (EMPTY, STABLE, COMPLETING):
                    group["state"] = PREPARING
                _add(state["pending_join"], member)
                _discard(state["awaiting_sync"], member)
                state["members"].setdefault(member, {"generation": None, "partitions": []})["phase"] = "joining"
        elif api == "LeaveGroup":
            def apply(state: dict[str, Any]) -> None:
                state["members"].setdefault(member, {"generation": None, "partitions": []})["phase"] = "left"
                _discard(state["pending_join"], member)
                _discard(state["awaiting_sync"], member)
                left = [m for m, v in state["members"].items() if v["phase"] not in ("left", "killed", "not started")]
                state["group"]["state"] = PREPARING if left else EMPTY
        self._step(r, f"{api}-request", f"{member} → {api}", explain, target, kafka, apply, member=member,
                   arrow={"src": member, "dst": "coordinator", "label": api, "tone": "request"})

    def _response(self, r: dict[str, Any], api: str, member: str) -> None:
        target, kafka, explain = APIS[api]
        error, name = r.get("error_code"), r.get("error_name") or "NO_ERROR"
        held = f" after {r['latency_ms'] / 1000:.2f} s" if (r.get("latency_ms") or 0) > 500 else ""
        title, tone, apply = f"{api} ← {name} to {member}{held}", "response", None
        if api == "Heartbeat":
            if error == REBALANCE_IN_PROGRESS:
                self.replay.count("notifications", r["ts"])
                explain = "REBALANCE_IN_PROGRESS: the incumbent learns of the change at its next heartbeat"
                tone, apply = "notify", _to_preparing
            elif error == UNKNOWN_MEMBER_ID:
                explain = "the coordinator removed this member (its session timed out): it must join again"
                tone = "conflict"
        elif api == "JoinGroup" and error == MEMBER_ID_REQUIRED:
            title = f"{member} → JoinGroup without id; ← MEMBER_ID_REQUIRED"
            explain = "KIP-394: a new member first gets its id, then joins with it (no rebalance yet)"
        elif api == "JoinGroup" and error == 0:
            generation = self.formed_generation(r, member)
            self.joined[member] = generation
            title = f"JoinGroup ← {self.generation_name(generation)} to {member}{held}"
            explain = self.join_explain(generation)
            apply = self._join_complete(member, generation)
        elif api == "SyncGroup" and error == 0:
            title = f"SyncGroup ← assignment to {member}{held}"
            apply = self._synced(member)
        elif api in ("JoinGroup", "SyncGroup") and error == REBALANCE_IN_PROGRESS:
            apply = _to_preparing
        self._step(r, f"{api}-response", title, explain, target, kafka, apply, member=member,
                   arrow={"src": "coordinator", "dst": member, "label": f"{api}: {name}",
                          "tone": "conflict" if error not in (0, None, REBALANCE_IN_PROGRESS) else tone})

    def formed_generation(self, r: dict[str, Any], member: str) -> int | None:
        """The generation a JoinGroup answer forms: its GenerationId on the wire, else the member's next record's."""
        wire = r.get("epoch_after")
        if isinstance(wire, int) and wire >= 0:
            return wire
        return self.next_generation.get((member, r["ts"]))

    def generation_name(self, generation: int | None) -> str:
        return f"generation {generation}"

    def join_explain(self, generation: int | None) -> str:
        return "the join is complete: a new generation, and each member is told who leads"

    def _join_complete(self, member: str, generation: int | None):
        def apply(state: dict[str, Any]) -> None:
            group = state["group"]
            if group["state"] != COMPLETING:  # the first answer of a join: onCompleteJoin ran
                group["state"] = COMPLETING
                group["generation"] = generation if generation is not None else (group["generation"] or 0) + 1
            _discard(state["pending_join"], member)
            _add(state["awaiting_sync"], member)
            state["members"].setdefault(member, {"generation": None, "partitions": []})["phase"] = "syncing"

        return apply

    def _synced(self, member: str):
        def apply(state: dict[str, Any]) -> None:
            _discard(state["awaiting_sync"], member)
            state["members"].setdefault(member, {"generation": None, "partitions": []})["phase"] = "stable"
            if state["group"]["state"] == COMPLETING and not state["pending_join"] and not state["awaiting_sync"]:
                state["group"]["state"] = STABLE

        return apply

    def _generation(self, r: dict[str, Any]) -> None:
        member, kind, parts = r["member"], r["kind"], list(r.get("partitions", ()))
        g = r["generation"] if r.get("generation") is not None else self.joined.get(member)
        # an incremental member (cooperative, consumer protocol) keeps `remaining`; an eager one keeps nothing
        kept = list(r.get("remaining") or ())

        def apply(state: dict[str, Any]) -> None:
            view = state["members"].setdefault(member, {"generation": None, "partitions": []})
            view["partitions"] = parts if kind == "assigned" else kept
            if kind == "assigned":
                view["generation"] = g
                # a killed member writes nothing more: its partitions are its until someone else is given them
                for other in state["members"].values():
                    if other is not view and other.get("phase") == "killed":
                        other["partitions"] = [p for p in other["partitions"] if p not in parts]

        shown = self.generation_step(r, g, parts, kept)
        if shown is None:
            self.replay.add(r["ts"], None, apply)
            return
        title, target, explain, kafka = shown
        self._step(r, f"generation-{kind}", title, explain, target, kafka, apply, member=member, detail=parts)

    def generation_step(self, r: dict[str, Any], g: int | None, parts: list[str],
                        kept: list[str]) -> tuple[str, Any, str, str] | None:
        """(title, code, explanation, Kafka source) of a member's `generation` record, or None: state only."""
        member, kind = r["member"], r["kind"]
        if kind == "assigned":
            title, target, explain = (f"{member} owns {len(parts)} partitions in generation {g}",
                                      CoordinatorMember._assigned, "on_partitions_assigned: it fetches from the "
                                      "committed offsets")
        else:
            title, target, explain = (f"{member} {'revokes' if kind == 'revoked' else 'lost'} {len(parts)} "
                                      f"partitions of generation {g}", CoordinatorMember._revoked,
                                      "eager protocol: every member gives up everything before rejoining")
        return title, target, explain, ("ConsumerCoordinator.onJoinComplete" if kind == "assigned"
                                        else "ConsumerCoordinator.onJoinPrepare")


def _to_preparing(state: dict[str, Any]) -> None:
    if state["group"]["state"] in (STABLE, EMPTY):
        state["group"]["state"] = PREPARING


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _discard(items: list[str], item: str) -> None:
    if item in items:
        items.remove(item)


def _pair(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """request key -> its response (the proxy matches them by correlation id per connection, docs/wire.md)."""
    return {(r.get("link"), r.get("conn"), r.get("correlation_id")): r for r in records
            if r["type"] == "wire" and r.get("proto") == "kafka" and r["kind"] == "response"}


def _next_generations(records: list[dict[str, Any]]) -> dict[tuple[str, float], int]:
    """(member, JoinGroup response ts) -> the generation that member reports next (its `assigned` record)."""
    found: dict[tuple[str, float], int] = {}
    waiting: dict[str, list[float]] = {}
    for r in records:
        if (r["type"] == "wire" and r.get("proto") == "kafka" and r["kind"] == "response"
                and r.get("api_name") == "JoinGroup" and r.get("error_code") == 0):
            waiting.setdefault(r.get("client_id"), []).append(r["ts"])
        elif r["type"] == "generation" and r["kind"] == "assigned":
            for ts in waiting.pop(r["member"], []):
                found[(r["member"], ts)] = r["generation"]
    return found


def build_coordinator(records: list[dict[str, Any]], window: Window) -> tuple[dict[str, Any], list[Step]]:
    return CoordinatorSteps(records, window).build()
