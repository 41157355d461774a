"""Lab member names sort in join order, in real runs and in the simulation (zkconsumer/lab/members/naming.py)."""

from __future__ import annotations

from zkconsumer.lab.members.naming import member_name, name_width
from zkconsumer.lab.sim.zk_sim import ZkSimConfig


def test_names_sort_in_index_order_at_every_size():
    for largest in (0, 9, 10, 64, 256, 10_000):
        names = [member_name(i, name_width(largest)) for i in range(largest + 1)]
        assert sorted(names) == names, f"string order differs from join order at {largest + 1} members"
        assert names[-1] == f"m{largest}"


def test_unpadded_names_would_not_sort_in_join_order():
    names = [member_name(i) for i in range(11)]
    assert sorted(names) != names  # the reason for the padding: m10 before m2


def test_the_simulation_pads_for_its_joiners_too():
    assert ZkSimConfig(members=9, joiners=1).name_width == 1  # m0 ... m9
    assert ZkSimConfig(members=10, joiners=1).name_width == 2  # m00 ... m10
    assert ZkSimConfig(members=8, joiners=3).name_width == 2  # m00 ... m10
