"""`View` (rebalance/assignment.py): the frozen value that names a view of the group, what "generation" means for
a group without a coordinator; the opt-in modes name their ZooKeeper nodes by its id."""

from __future__ import annotations

import dataclasses

import pytest

from rebalance.assignment import AssignmentContext, View
from rebalance.opt_in import view_id

SUBSCRIPTIONS = {"a": {"t": 2}, "b": {"t": 1, "u": 1}}
PARTITIONS = {"t": [0, 1, 2], "u": [0]}


def test_members_that_read_the_same_group_name_the_same_view():
    mine, theirs = (View.of(AssignmentContext.build(m, SUBSCRIPTIONS, PARTITIONS)) for m in ("a", "b"))
    assert mine == theirs and hash(mine) == hash(theirs)
    assert mine.members == frozenset({"a", "b"}) and str(mine) == mine.id


def test_the_id_is_the_one_every_version_computes():
    """Members compute the id on their own and a rolling upgrade mixes versions: it must not change (the value is
    what the hash gave before the type existed)."""
    context = AssignmentContext.build("a", SUBSCRIPTIONS, PARTITIONS)
    assert View.of(context).id == view_id(context) == "812d321e81af9260"


@pytest.mark.parametrize("subscriptions, partitions", [
    ({**SUBSCRIPTIONS, "c": {"t": 1}}, PARTITIONS),  # a member more
    ({"a": {"t": 2}, "b": {"t": 2}}, PARTITIONS),  # a subscription changed
    (SUBSCRIPTIONS, {**PARTITIONS, "u": [0, 1]}),  # a partition more
])
def test_any_change_of_the_group_is_another_view(subscriptions, partitions):
    before = View.of(AssignmentContext.build("a", SUBSCRIPTIONS, PARTITIONS))
    assert View.of(AssignmentContext.build("a", subscriptions, partitions)) != before


def test_a_view_is_frozen():
    view = View.of(AssignmentContext.build("a", SUBSCRIPTIONS, PARTITIONS))
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.id = "other"  # type: ignore[misc]
