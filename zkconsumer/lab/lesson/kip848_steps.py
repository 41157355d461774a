"""The consumer protocol's steps (KIP-848): no JoinGroup, no SyncGroup, no leader; heartbeats carry everything.

One API, ConsumerGroupHeartbeat, joins (member epoch 0), heartbeats, acknowledges (the request lists what the
member owns, `owned`, only when that changed) and leaves (-1). The broker computes the target assignment itself
and hands each member its share in the answer to its next heartbeat (`assigned`, null = no change), with the
member epoch it is at (`epoch_after`; docs/wire.md decodes all four fields). Apache Kafka's group coordinator
(`GroupMetadataManager.consumerGroupHeartbeat`, `CurrentAssignmentBuilder`) moves a member to the new epoch only
once it owns nothing another member is to get: an incumbent answered a smaller target stays at its epoch,
revokes, and reports what it owns; the joiner is handed the freed partitions at its following heartbeat.

The group's state is not on the wire either; it is derived (docs/lesson.md):

* the group epoch is the highest member epoch any answer gave (a join or a leave raises it);
* Empty with no live member; Reconciling while a member the broker knows is behind the group epoch, is
  revoking or waiting for partitions, or a partition is owned by nobody (a joiner waits for it); else Stable.
  Kafka's Assigning (a target not computed yet) cannot be told apart on the wire and is not shown.

Members' `generation` records (librdkafka's incremental callbacks, docs/traces.md) give what each owns.
"""

from __future__ import annotations

from typing import Any

from zkconsumer.lab.lesson.coord_steps import CoordinatorSteps
from zkconsumer.lab.lesson.model import Step, n_partitions
from zkconsumer.lab.lesson.replay import Window
from zkconsumer.lab.members.librdkafka import LibrdkafkaMember
from zkconsumer.lab.rules.protocol import GROUP_HEARTBEAT_API
from zkconsumer.lab.sim.coordinator import EMPTY, STABLE
from zkconsumer.lab.wire.kafka_codec import (
    decode_consumer_group_heartbeat_request,
    decode_consumer_group_heartbeat_response,
)

# Kafka's ConsumerGroup.ConsumerGroupState names (Assigning is not derivable from the wire, see above)
RECONCILING = "Reconciling"
STATES = (EMPTY, RECONCILING, STABLE)
KAFKA_HEARTBEAT = "GroupMetadataManager.consumerGroupHeartbeat"
KAFKA_RECONCILE = "CurrentAssignmentBuilder (MemberState.UNREVOKED_PARTITIONS)"
# phases of members the broker does not count (yet, or any more) when it decides whether the group is stable
NOT_IN_GROUP = ("not started", "starting", "joining", "left", "killed")
# phases of a member that has not reached its target. Not "assigned" nor "confirming": a member answered its new
# partitions is at the target epoch and STABLE for the broker (CurrentAssignmentBuilder.computeNextAssignment
# moves it there when nothing it is to get is still another member's; a partial answer leaves partitions that
# another member revokes or nobody owns, which keeps the group Reconciling on their account), and its next
# heartbeat only confirms what it owns.
UNSETTLED = ("revoking", "acknowledging", "waiting", "fenced")


class ConsumerProtocolSteps(CoordinatorSteps):
    SHOWN_APIS = (GROUP_HEARTBEAT_API, "OffsetCommit", "OffsetFetch", "FindCoordinator")

    def __init__(self, records: list[dict[str, Any]], window: Window) -> None:
        super().__init__(records, window, design="consumer")
        # what the builder knows so far, in record order (titles are written when the record is read)
        self.group_epoch: int | None = None
        self.owned: dict[str, int] = {}
        self.phase: dict[str, str] = {}

    def initial_state(self) -> dict[str, Any]:
        return {"group": {"state": EMPTY, "generation": None},
                "members": {m: {"phase": "not started", "generation": None, "partitions": []}
                            for m in self.members}}

    def add_counters(self) -> None:
        self.replay.counter("assignments", "new assignments")

    def _derive(self, state: dict[str, Any]) -> dict[str, Any]:
        derived = super()._derive(state)
        epoch = state["group"]["generation"]
        known = [v for v in state["members"].values() if v["phase"] not in NOT_IN_GROUP]
        if not known:
            group_state = EMPTY
        elif derived["unowned"] or any(v["generation"] != epoch or v["phase"] in UNSETTLED for v in known):
            group_state = RECONCILING
        else:
            group_state = STABLE
        return {**derived, "group": {"state": group_state, "generation": epoch}}

    def _wire(self, r: dict[str, Any]) -> None:
        if r["api_name"] != GROUP_HEARTBEAT_API:
            super()._wire(r)
            return
        member = r.get("client_id") or r.get("link")
        if r["kind"] == "response":
            self._heartbeat_response(r, member)
            return
        super()._wire(r)  # counts it, and shows it when it is a join, an acknowledgement or a leave

    def _request(self, r: dict[str, Any], api: str, member: str, response: dict[str, Any] | None) -> None:
        epoch, owned = r.get("member_epoch"), r.get("owned")
        before = self.phase.get(member)
        if epoch == 0:
            phase, label = "joining", "heartbeat e0: join"
            title = f"{member} → ConsumerGroupHeartbeat, epoch 0: join"
            explain = ("KIP-848: one heartbeat joins; no JoinGroup, no SyncGroup, no leader computing the "
                       "assignment, and nobody else has to stop")
        elif epoch is not None and epoch < 0:
            phase, label = "leaving", f"heartbeat e{epoch}: leave"
            title = f"{member} → ConsumerGroupHeartbeat, epoch {epoch}: leave"
            explain = "a graceful leave: the broker moves the group to a new epoch and hands its partitions on"
        else:
            # only a member that revoked is acknowledging something the broker waits for
            phase = "acknowledging" if before == "revoking" else "confirming"
            label = f"heartbeat: owns {owned}"
            title = f"{member} → ConsumerGroupHeartbeat, epoch {epoch}: owns {owned}"
            explain = {"revoking": "it revoked and says what it owns now: only after this may the broker give "
                                   "the freed partitions to another member",
                       "assigned": "it took its new partitions and confirms what it owns",
                       "waiting": "a heartbeat interval later the joiner, still owning nothing, asks again"}.get(
                before or "", "it reports what it owns")
            if before == "waiting":
                phase = "waiting"
        self.phase[member] = phase
        self._step(r, f"{api}-request", title, explain, decode_consumer_group_heartbeat_request, KAFKA_HEARTBEAT,
                   self._set_phase(member, phase), member=member,
                   arrow={"src": member, "dst": "coordinator", "label": label, "tone": "request"})

    def _heartbeat_response(self, r: dict[str, Any], member: str) -> None:
        error, name = r.get("error_code"), r.get("error_name") or "NO_ERROR"
        sent, after, assigned = r.get("member_epoch"), r.get("epoch_after"), r.get("assigned")
        before, owned = self.phase.get(member), self.owned.get(member, 0)
        group_before = self.group_epoch
        if isinstance(after, int) and after > (self.group_epoch or 0):
            self.group_epoch = after
        if error in (0, None) and isinstance(after, int) and after >= 0:
            # librdkafka's generation records carry no epoch: a member's assignment callback is of the epoch its
            # latest answer gave it, and must not leave it looking behind the group (`_generation`)
            self.joined[member] = after
        if assigned is not None:
            self.replay.count("assignments", r["ts"])
        tone, label = "response", f"epoch {after}"
        if error not in (0, None):
            phase, tone, label = "fenced", "conflict", name
            title = f"{member} ← {name}"
            explain = ("the broker no longer accepts this member at this epoch: it gives its partitions up as lost "
                       "and joins again with epoch 0")
        elif sent is not None and sent < 0:
            phase = "left"
            title = f"{member} ← left the group (epoch {after})"
            explain = "the broker removed the member; the others learn their new targets at their next heartbeats"
        elif sent == 0:
            phase = "waiting" if not assigned else "assigned"
            label = f"epoch {after}, {assigned} partitions"
            title = (f"{member} ← epoch {after} with {n_partitions(assigned or 0)}: group epoch {group_before} → "
                     f"{self.group_epoch}")
            explain = ("the broker adds the member and computes the new target assignment itself: a new group "
                       "epoch; partitions other members still own are not handed out yet")
        elif assigned is not None and assigned < owned:
            phase, tone, label = "revoking", "notify", f"target {assigned} of {owned}"
            title = f"{member} ← new target: {assigned} of its {owned} partitions, still epoch {after}"
            explain = ("its next heartbeat brings its target: only a member that must give something up acts, and "
                       "it stays at its epoch until it says it has")
        elif assigned is not None:
            phase, tone, label = "assigned", "notify", f"epoch {after}, {assigned} partitions"
            title = f"{member} ← assignment: {n_partitions(assigned)} at epoch {after}"
            explain = ("the partitions the others freed, handed over at this member's next heartbeat: the change "
                       "waits for heartbeats, not for the whole group")
        elif before in ("acknowledging", "revoking"):
            phase = "stable"
            title = f"{member} ← epoch {after}: acknowledged, it owns just its target"
            explain = "the broker saw the revocation: the member is at the group epoch, the freed partitions can move"
        elif isinstance(after, int) and isinstance(sent, int) and after > sent:
            phase = "stable"
            title = f"{member} ← epoch {after}: nothing moves from it"
            explain = "all it owns is in its new target: it moves to the new epoch without stopping anything"
        else:
            phase = before if before == "waiting" else "stable"
            title = f"{member} ← heartbeat: epoch {after}, " + ("still nothing to take" if phase == "waiting"
                                                                else "no change")
            explain = "a steady heartbeat: the answer's assignment is null, nothing changes for this member"
        self.phase[member] = phase

        def apply(state: dict[str, Any]) -> None:
            view = state["members"].setdefault(member, {"generation": None, "partitions": []})
            view["phase"] = phase
            if isinstance(after, int) and after >= 0:
                view["generation"] = after
                state["group"]["generation"] = max(after, state["group"]["generation"] or 0)

        self._step(r, f"{GROUP_HEARTBEAT_API}-response", title, explain, decode_consumer_group_heartbeat_response,
                   KAFKA_RECONCILE if phase == "revoking" else KAFKA_HEARTBEAT, apply, member=member,
                   arrow={"src": "coordinator", "dst": member, "label": label, "tone": tone})

    def _set_phase(self, member: str, phase: str):
        def apply(state: dict[str, Any]) -> None:
            state["members"].setdefault(member, {"generation": None, "partitions": []})["phase"] = phase

        return apply

    def _generation(self, r: dict[str, Any]) -> None:
        kept = r.get("remaining")
        self.owned[r["member"]] = len(r.get("partitions", ())) if r["kind"] == "assigned" else len(kept or ())
        super()._generation(r)

    def generation_step(self, r: dict[str, Any], g: int | None, parts: list[str],
                        kept: list[str]) -> tuple[str, Any, str, str] | None:
        member, kind = r["member"], r["kind"]
        if kind == "assigned":
            added = list(r.get("added") or ())
            if not added:
                return None  # the callback after a revoke restates what the member kept
            return (f"{member} owns {n_partitions(len(parts))}: +{len(added)}", LibrdkafkaMember._on_assign,
                    "it starts fetching the partitions it was handed, from the committed offsets", KAFKA_HEARTBEAT)
        if kind == "lost":
            return (f"{member} lost {n_partitions(len(parts))}, keeps {len(kept)}", LibrdkafkaMember._on_lost,
                    "fenced: the partitions may be another member's already, so nothing is committed",
                    "ConsumerRebalanceListener.onPartitionsLost")
        return (f"{member} revokes {n_partitions(len(parts))}, keeps {len(kept)}", LibrdkafkaMember._on_revoke,
                "only the partitions that move are revoked, only by the member that had them; it goes on "
                "consuming the rest", KAFKA_RECONCILE)


def build_consumer_protocol(records: list[dict[str, Any]], window: Window) -> tuple[dict[str, Any], list[Step]]:
    return ConsumerProtocolSteps(records, window).build()
