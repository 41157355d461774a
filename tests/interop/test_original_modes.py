"""The opt-in modes (docs/modes.md) beside original 0.8.2.2 members: a group mixing originals with incremental,
claim-on-deletion and barrier members settles on what the original's own assignor decides (the originals read the
barrier member's registration, with its extra key, as any other), and a barrier member refuses a group of originals.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import mode_overrides, unique, wait_for
from interop_support import settle

from zkconsumer import ConsumerRebalanceFailedError
from zkconsumer.zookeeper import layout

pytestmark = pytest.mark.interop


def test_originals_and_opt_in_members_settle_together(cluster, members, originals, zk, tmp_path: Path) -> None:
    topic = cluster.create_topic(partitions=8)
    group = unique("modes-mixed")
    # The barrier member first: alone, it runs the barrier; once the originals are in, it stands aside.
    members(group, "b1", **mode_overrides("barrier")).create_message_streams({topic: 1})
    first = originals(group, "o1", topics={topic: 1})
    members(group, "i1", **mode_overrides("incremental")).create_message_streams({topic: 1})
    second = originals(group, "o2", topics={topic: 2}, wait=False)
    members(group, "c1", **mode_overrides("claim-on-deletion", **{"zkconsumer.patient.membership.ms": 300})
            ).create_message_streams({topic: 1})
    second.wait_ready()
    expected = settle(zk, tmp_path, {group: "range"})
    assert {owner.rsplit("-", 1)[0] for owner in expected[group].values()} == {
        f"{group}_{name}" for name in ("b1", "o1", "i1", "o2", "c1")}
    first.stop()  # an original leaves: everyone, originals included, moves on
    settle(zk, tmp_path, {group: "range"})


def test_a_barrier_member_refuses_a_group_with_an_original(cluster, members, originals, zk) -> None:
    topic = cluster.create_topic(partitions=4)
    group = unique("modes-refuse")
    originals(group, "o1", topics={topic: 1})
    with pytest.raises(ConsumerRebalanceFailedError, match="o1"):
        members(group, "b1", **mode_overrides("barrier")).create_message_streams({topic: 1})
    wait_for(lambda: zk.children(layout.ids_dir(group)) == [f"{group}_o1"], 30, message="the refuser deregistered")
