"""The coordinator design's per-join identities: what holds, what is flagged, and when they apply at all."""

from __future__ import annotations

from zkconsumer.lab.rules import identities


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


def test_cooperative_sticky_takes_a_second_generation_only_when_an_incumbent_revoked():
    n = 3
    # measured through the proxy on Kafka 4.4 (librdkafka 2.16, 12 partitions): a join into 3 incumbents
    two_rounds = {"JoinGroup": 2 * n + 3, "SyncGroup": 2 * n + 2, "LeaveGroup": 0}
    assert all(c.holds for c in identities.broker_side_join("cooperative", n, two_rounds, 2, True, 0))
    # nothing to move (more members than partitions): the eager counts, one generation
    one_round = {"JoinGroup": n + 2, "SyncGroup": n + 1}
    assert all(c.holds for c in identities.broker_side_join("cooperative", n, one_round, 1, False, 0))
    # a second generation nobody's revoke explains is flagged
    failed = [str(c) for c in identities.broker_side_join("cooperative", n, two_rounds, 2, False, 0) if not c.holds]
    assert failed == ["JoinGroup 9≠5", "SyncGroup 8≠4", "generations 2≠1"]


def test_the_consumer_protocol_joins_in_one_epoch_without_join_or_sync_requests():
    counts = {"ConsumerGroupHeartbeat": 40, "OffsetFetch": 1}
    assert all(c.holds for c in identities.broker_side_join("consumer", 8, counts, 1, True, 1))
    failed = [str(c) for c in identities.broker_side_join("consumer", 8, {**counts, "JoinGroup": 1}, 2, True, 2)
              if not c.holds]
    assert failed == ["JoinGroup+SyncGroup+LeaveGroup 1≠0", "epoch-0 heartbeats 2≠1", "group epochs 2≠1"]
