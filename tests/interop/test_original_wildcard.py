"""Wildcard subscriptions (createMessageStreamsByFilter) on the original 0.8.2.2 consumer and ours: the same
normalised and escaped regex in the registration, the same topics allowed (an excluded topic is never owned),
the same owners, and the same reaction to a matching topic created later (the topic event watcher).

The broker is shared by the whole session, so the regexes only match this test's topics: the whitelist names
them; the blacklist excludes everything without the test's prefix (a negative lookahead, the same in Java's and
Python's dialects) and the excluded topic.
"""

from __future__ import annotations

import pytest
from helpers import unique
from interop_support import normalised, settle, without_timestamp

from rebalance.subscription import Blacklist, Whitelist
from zkconsumer.zookeeper import layout

pytestmark = [pytest.mark.interop, pytest.mark.slow]
STREAMS = {"c1": 2, "c2": 1}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
@pytest.mark.parametrize("kind", ["whitelist", "blacklist"])
def test_wildcard_groups_of_original_ours_and_mixed_agree(cluster, members, originals, zk, tmp_path, kind,
                                                          strategy):
    prefix = unique("wc")
    for name, partitions in (("a", 3), ("b", 2), ("c", 2)):
        cluster.create_topic(f"{prefix}.{name}", partitions=partitions)
    # Commas and spaces are what TopicFilter normalises away; "\." exercises the JSON escaping.
    regex = (rf"{prefix}\.a, {prefix}\.b,{prefix}\.d" if kind == "whitelist"
             else rf"(?!{prefix}\.).*, {prefix}\.c")
    topic_filter = Whitelist(regex) if kind == "whitelist" else Blacklist(regex)
    groups = {k: unique(f"{k}-{kind}") for k in ("orig", "ours", "mixed")}
    started = []
    for consumer, streams in STREAMS.items():
        started.append(originals(groups["orig"], consumer, wait=False, streams=streams,
                                 partition_assignment_strategy=strategy, **{kind: regex}))
    started.append(originals(groups["mixed"], "c1", wait=False, streams=STREAMS["c1"],
                             partition_assignment_strategy=strategy, **{kind: regex}))
    for consumer, streams in STREAMS.items():
        members(groups["ours"], consumer, partition_assignment_strategy=strategy).create_message_streams_by_filter(
            topic_filter, streams)
    members(groups["mixed"], "c2", partition_assignment_strategy=strategy).create_message_streams_by_filter(
        topic_filter, STREAMS["c2"])
    for member in started:
        member.wait_ready()

    for consumer in STREAMS:
        theirs = zk.get(layout.registration_path(groups["orig"], f"{groups['orig']}_{consumer}"))
        ours = zk.get(layout.registration_path(groups["ours"], f"{groups['ours']}_{consumer}"))
        assert without_timestamp(theirs) == without_timestamp(ours)
        assert f'"pattern":"{topic_filter.pattern_name}"'.encode() in theirs

    group_strategies = dict.fromkeys(groups.values(), strategy)
    expected = settle(zk, tmp_path / "before", group_strategies)
    reference = normalised(expected[groups["orig"]], groups["orig"])
    assert {t for t, _ in reference} == {f"{prefix}.a", f"{prefix}.b"}  # .c excluded, .d not there yet
    for k in ("ours", "mixed"):
        assert normalised(expected[groups[k]], groups[k]) == reference

    cluster.create_topic(f"{prefix}.d", partitions=2)  # matches: every member's topic watcher must pick it up
    expected = settle(zk, tmp_path / "after", group_strategies)
    reference = normalised(expected[groups["orig"]], groups["orig"])
    assert {t for t, _ in reference} == {f"{prefix}.a", f"{prefix}.b", f"{prefix}.d"}
    for k in ("ours", "mixed"):
        assert normalised(expected[groups[k]], groups[k]) == reference
