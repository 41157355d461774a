"""The consumer protocol's replay (kip848_steps.py) on a recorded run, without servers: the shipped `lesson`
scenario on the consumer design (Apache Kafka 4.x, librdkafka members), kept as recorded but for the wire records
the replay does not read and each record's sampled bytes. In this run the joiner's confirming heartbeat (it lists
what it was given) had left when the lab's stable record closed the window, and every incumbent had already heard
the new group epoch: nobody was behind."""

from __future__ import annotations

import json
from pathlib import Path

from zkconsumer.lab.lesson.kip848_steps import RECONCILING, UNSETTLED, build_consumer_protocol
from zkconsumer.lab.lesson.replay import change_window
from zkconsumer.lab.sim.coordinator import STABLE

RUN = Path(__file__).with_name("data") / "kip848-joiner-confirms-at-the-stable-record.jsonl"


def _replay():
    records = [json.loads(line) for line in RUN.read_text(encoding="utf-8").splitlines()]
    return build_consumer_protocol(records, change_window(records, None))


def test_a_member_handed_its_partitions_is_at_the_group_epoch_and_settled() -> None:
    """Kafka's CurrentAssignmentBuilder moves a member to the target epoch, STABLE, in the answer that hands it
    its partitions; the member's assignment record (librdkafka's carries no epoch) and its confirming heartbeat
    change neither. So with every partition owned once and nobody behind, the group is Stable at the window's end."""
    _, steps = _replay()
    joiner = next(s.member for s in steps if s.kind == "change")
    last = steps[-1].state
    assert steps[-1].kind == "stable" and not last["unowned"]
    epoch = last["group"]["generation"]
    assert {m: v["generation"] for m, v in last["members"].items()} == dict.fromkeys(last["members"], epoch)
    confirm = steps[-2]
    assert (confirm.member, confirm.kind) == (joiner, "ConsumerGroupHeartbeat-request")
    assert "owns" in confirm.title and confirm.state["members"][joiner]["phase"] not in UNSETTLED
    assert last["group"]["state"] == STABLE


def test_the_group_reconciles_while_an_incumbent_revokes() -> None:
    _, steps = _replay()
    revoking = [s for s in steps if s.member and s.state["members"][s.member]["phase"] == "revoking"]
    assert revoking and all(s.state["group"]["state"] == RECONCILING for s in revoking)
    # and the joiner, answered with nothing yet to take, waits in a Reconciling group
    waiting = [s for s in steps if s.member and s.state["members"][s.member]["phase"] == "waiting"]
    assert all(s.state["group"]["state"] == RECONCILING for s in waiting)
