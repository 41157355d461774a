"""The cooperative design's steps (KIP-429): the classic protocol of coord_steps.py, with incremental revokes.

The wire is the same JoinGroup/SyncGroup/Heartbeat exchange, so the group state is derived exactly as for the
eager design (coord_steps.py, docs/lesson.md). What differs is what the members do with each generation
(Apache Kafka's `ConsumerCoordinator.onJoinComplete` with the `cooperative-sticky` assignor, which librdkafka
implements the same way):

* round 1: the leader's assignor leaves every member what it owns, except the partitions that must move, which it
  gives to nobody yet: a member never gets a partition another still owns. Nobody stops consuming the rest.
* the members that lost partitions in that assignment revoke only those (`revoked` with `remaining`) and rejoin
  at once: a second rebalance.
* round 2: the freed partitions go to their new owner.

librdkafka's members report no generation number (their `generation` records carry null), so a member's
generation is the one its latest JoinGroup answer formed (`epoch_after`, docs/wire.md), and each generation
formed after the change is numbered as its round.
"""

from __future__ import annotations

from typing import Any

from zkconsumer.lab.lesson.coord_steps import CoordinatorSteps
from zkconsumer.lab.lesson.model import Step, n_partitions
from zkconsumer.lab.lesson.replay import Window
from zkconsumer.lab.members.librdkafka import LibrdkafkaMember

KAFKA_ASSIGN = "ConsumerCoordinator.onJoinComplete (CooperativeStickyAssignor)"
KAFKA_REVOKE = "ConsumerCoordinator.onJoinComplete: revoke owned partitions not assigned, then requestRejoin"


class CooperativeSteps(CoordinatorSteps):
    def __init__(self, records: list[dict[str, Any]], window: Window) -> None:
        super().__init__(records, window, design="cooperative")
        # the first generation formed after the change is its round 1
        formed = [r.get("epoch_after") for r in records
                  if r["type"] == "wire" and r.get("proto") == "kafka" and r["kind"] == "response"
                  and r.get("api_name") == "JoinGroup" and r.get("error_code") == 0 and r["ts"] >= window.start
                  and isinstance(r.get("epoch_after"), int) and r["epoch_after"] >= 0]
        self.first_round = min(formed, default=None)

    def round_of(self, generation: int | None) -> int | None:
        if generation is None or self.first_round is None or generation < self.first_round:
            return None
        return generation - self.first_round + 1

    def generation_name(self, generation: int | None) -> str:
        number = self.round_of(generation)
        return f"generation {generation}" + (f" (round {number})" if number is not None else "")

    def join_explain(self, generation: int | None) -> str:
        number = self.round_of(generation)
        if number == 1:
            return ("round 1: the cooperative-sticky assignor leaves every member what it owns; a partition that "
                    "must move goes to nobody yet, so nobody stops consuming")
        if number is not None:
            return (f"round {number}: a member revoked in the last round and rejoined, so the partitions it "
                    "freed can now go to their new owner")
        return "a new generation; each member is told who leads"

    def generation_step(self, r: dict[str, Any], g: int | None, parts: list[str],
                        kept: list[str]) -> tuple[str, Any, str, str] | None:
        member, kind = r["member"], r["kind"]
        number = self.round_of(g)
        where = f"generation {g}" + (f", round {number}" if number is not None else "")
        if kind == "assigned":
            added = list(r.get("added") or ())
            if added:
                return (f"{member} owns {n_partitions(len(parts))} ({where}): +{len(added)}",
                        LibrdkafkaMember._on_assign, "the partitions freed in an earlier round reach their new "
                        "owner: it fetches them from the committed offsets", KAFKA_ASSIGN)
            title = (f"{member} keeps its {n_partitions(len(parts))} ({where}): nothing added" if parts
                     else f"{member} gets no partitions yet ({where})")
            return (title, LibrdkafkaMember._on_assign, "incremental assignment: a member hears only what is "
                    "added; it went on consuming what it kept all along", KAFKA_ASSIGN)
        if kind == "lost":
            return (f"{member} lost {n_partitions(len(parts))}, keeps {len(kept)} ({where})", LibrdkafkaMember._on_lost,
                    "its session ended: the partitions may be another member's already, so nothing is committed",
                    "ConsumerRebalanceListener.onPartitionsLost")
        return (f"{member} revokes {len(parts)} of its partitions, keeps {len(kept)} ({where})",
                LibrdkafkaMember._on_revoke, "cooperative: only the partitions that move are revoked, the rest "
                "are consumed throughout; then the member rejoins at once for the next round", KAFKA_REVOKE)


def build_cooperative(records: list[dict[str, Any]], window: Window) -> tuple[dict[str, Any], list[Step]]:
    return CooperativeSteps(records, window).build()
