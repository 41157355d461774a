"""The coordinator design's per-join identities: what holds, what is flagged, and when they apply at all."""

from __future__ import annotations

from zkconsumer.lab import identities


def _counts(n: int) -> dict[str, int]:
    return {"JoinGroup": n + 2, "SyncGroup": n + 1, "LeaveGroup": 0, "FindCoordinator": 1,
            "Heartbeat": 7 * n, "OffsetFetch": 3, "OffsetCommit": 5 * n}


def test_a_clean_join_holds_every_identity_whatever_the_heartbeats_fetches_and_commits():
    for n in (1, 2, 16, 32):
        checks = identities.coordinator_join(n, _counts(n), generations=1)
        assert [c.name for c in checks] == ["JoinGroup", "SyncGroup", "LeaveGroup", "FindCoordinator",
                                            "generations"]
        assert all(c.holds for c in checks)


def test_a_dropped_join_or_a_second_generation_is_flagged():
    counts = _counts(8)
    counts["JoinGroup"] += 1  # kafka-python joining again after a finished join it did not see
    counts["SyncGroup"] += 1
    failed = [str(c) for c in identities.coordinator_join(8, counts, generations=2) if not c.holds]
    assert failed == ["JoinGroup 11≠10", "SyncGroup 10≠9", "generations 2≠1"]


def test_they_apply_to_one_join_only():
    assert identities.single_join(1, 0)
    assert not identities.single_join(2, 0)  # two joiners
    assert not identities.single_join(1, 1)  # a join and a leave
    assert not identities.single_join(0, 1)
