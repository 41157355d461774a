"""What a window of changes cost the partitions (zkconsumer/lab/rules/handover.py), on hand-built record sequences with
known answers: an eager join (every incumbent revokes everything and gets most of it back), a cooperative join
(only what moves is revoked), the ZooKeeper design's fetcher events, a kill, and the original's owner snapshots."""

from __future__ import annotations

from zkconsumer.lab.rules.handover import Handover

P = [f"t/{i}" for i in range(6)]


def gen(member, kind, partitions, **extra):
    return {"type": "generation", "member": member, "kind": kind, "partitions": partitions, **extra}


def fold_window(before, during):
    h = Handover()
    for record in before:
        h.fold(record)
    h.start()
    for record in during:
        h.fold(record)
    h.end()
    return h


def test_an_eager_join_revokes_everything_and_most_of_it_comes_back():
    before = [gen("a", "assigned", P[:3]), gen("b", "assigned", P[3:])]
    # c joins: a and b revoke all, the range assignor gives a {0,1}, b {2,3}, c {4,5}
    during = [gen("a", "revoked", P[:3]), gen("b", "revoked", P[3:]),
              gen("a", "assigned", P[:2]), gen("b", "assigned", P[2:4]), gen("c", "assigned", P[4:])]
    h = fold_window(before, during)
    assert h.revoked_kept == 3  # a kept 0,1; b kept 3: revoked for nothing
    assert h.moved == 3  # 2 went a -> b, 4 and 5 went b -> c


def test_a_cooperative_join_revokes_only_what_moves():
    before = [gen("a", "assigned", P[:3]), gen("b", "assigned", P[3:])]
    during = [gen("a", "revoked", ["t/2"], remaining=P[:2]), gen("b", "revoked", ["t/5"], remaining=P[3:5]),
              gen("a", "assigned", P[:2], added=[]), gen("b", "assigned", P[3:5], added=[]),
              gen("c", "assigned", ["t/2", "t/5"], added=["t/2", "t/5"])]
    h = fold_window(before, during)
    assert h.revoked_kept == 0
    assert h.moved == 2
    assert h.owned["a"] == set(P[:2])


def test_the_zookeeper_design_fetcher_events_count_alike():
    def ev(member, kind, **fields):
        return {"type": "member_event", "member": member, "kind": kind, **fields}

    before = [ev("a", "fetchers_started", offsets={tp: 0 for tp in P[:3]}),
              ev("b", "fetchers_started", offsets={tp: 0 for tp in P[3:]})]
    during = [ev("a", "fetchers_stopped", partitions=P[:3]), ev("b", "fetchers_stopped", partitions=P[3:]),
              ev("a", "fetchers_started", offsets={tp: 5 for tp in P[:2]}),
              ev("b", "fetchers_started", offsets={tp: 5 for tp in P[2:4]}),
              ev("c", "fetchers_started", offsets={tp: 5 for tp in P[4:]})]
    h = fold_window(before, during)
    assert (h.revoked_kept, h.moved) == (3, 3)


def test_a_killed_member_owns_nothing_and_what_it_had_moves():
    before = [gen("a", "assigned", P[:3]), gen("b", "assigned", P[3:])]
    during = [{"type": "membership", "action": "kill", "members": ["b"]},
              gen("a", "revoked", P[:3]), gen("a", "assigned", P)]
    h = fold_window(before, during)
    assert h.moved == 3 and h.revoked_kept == 3


def test_the_original_consumer_has_owner_snapshots_only():
    # the snapshot before the window caught the initial group half-settled: the first one inside it is the start
    before = [{"type": "owners", "owners": {"t/0": "a-0"}}]
    during = [{"type": "owners", "owners": {"t/0": "a-0", "t/1": "a-0"}},
              {"type": "owners", "owners": {"t/0": "a-0", "t/1": "b-0"}}]
    h = fold_window(before, during)
    assert h.moved == 1
    assert h.revoked_kept_or_none is None  # it reports no revocations of its own
