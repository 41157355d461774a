"""Our assignors against the original 0.8.2.2 ones, on groups written into ZooKeeper.

Each case is a group (registrations: static, whitelist or blacklist; topic znodes, some missing) written into a
chroot of its own. The original decides through `OriginalAssignorOracle` (its `AssignmentContext` reads the
znodes, its `RangeAssignor`/`RoundRobinAssignor.assign` decides per member, all cases in one JVM); ours reads the
same znodes through `ZkGroupStore` the way `ZKRebalancerListener.build_assignment_context` does and runs
`rebalance/assignors.py`. Per member, both must give the same partitions to the same threads, or both must fail.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ZkProbe, unique
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fetcher_manager.fetcher_id import java_string_hashcode
from rebalance.assignment import AssignmentContext
from rebalance.assignors import AssignmentError, get_assignor
from rebalance.subscription import Blacklist, Registration, Whitelist
from zkconsumer.interop.original import OracleCase, run_assignor_oracle
from zkconsumer.zookeeper import codecs, layout
from zkconsumer.zookeeper.client import ZkClient
from zkconsumer.zookeeper.group import ZkGroupStore

pytestmark = pytest.mark.interop
GROUP = "g"
# No two names here give a Java hash tie for "[topic,partition]" below 16 (checked at import): roundrobin breaks
# ties by JVM HashMap iteration order, which the catalogue covers separately.
TOPIC_POOL = ("t", "orders", "payments", "clicks", "a.b", "x-1", "x_1", "T0", "events", "k")
CONSUMER_POOL = ("c", "c1", "c2", "c10", "c-1", "a", "b1")
INTERNAL = "__consumer_offsets"


@dataclass(frozen=True)
class Member:
    cid: str
    pattern: str  # static, white_list, black_list
    topics: tuple[tuple[str, int], ...] = ()  # static: (topic, streams) in registration order
    regex: str = ""
    streams: int = 1

    def registration(self) -> Registration:
        if self.pattern == "static":
            return Registration.static(dict(self.topics), timestamp="1")
        topic_filter = Whitelist(self.regex) if self.pattern == "white_list" else Blacklist(self.regex)
        return Registration.wildcard(topic_filter, self.streams, timestamp="1")


@dataclass(frozen=True)
class GroupCase:
    strategy: str
    members: tuple[Member, ...]
    topics: tuple[tuple[str, tuple[int, ...] | None], ...]  # None: subscribed to, but no topic znode
    exclude_internal: bool = True


def case_nodes(root: str, case: GroupCase) -> list[tuple[str, bytes]]:
    """The case's znodes under `root`, parents first (null-data parents would do as well: nobody reads them)."""
    nodes = [(root, b""), (f"{root}/brokers", b""), (f"{root}{layout.BROKER_TOPICS}", b"")]
    nodes += [(f"{root}{layout.topic_path(t)}", codecs.encode_topic({p: [0] for p in partitions}))
              for t, partitions in case.topics if partitions is not None]
    nodes += [(f"{root}{layout.CONSUMERS}", b""), (f"{root}{layout.group_dir(GROUP)}", b""),
              (f"{root}{layout.ids_dir(GROUP)}", b"")]
    nodes += [(f"{root}{layout.registration_path(GROUP, f'{GROUP}_{m.cid}')}",
               codecs.encode_registration(m.registration())) for m in case.members]
    return nodes


def ours(zk: ZkClient, case: GroupCase) -> dict[str, dict | str]:
    """Each member's decision, from the znodes, as `ZKRebalancerListener.build_assignment_context` builds it."""
    store = ZkGroupStore(zk, GROUP)
    assignor = get_assignor(case.strategy)
    result: dict[str, dict | str] = {}
    for consumer in sorted(store.member_ids()):
        all_topics = store.all_topics()
        subscriptions = {m: store.registration(m).topic_streams(all_topics, case.exclude_internal)
                         for m in store.member_ids()}
        topics = {t for s in subscriptions.values() for t in s}
        context = AssignmentContext.build(consumer, subscriptions, store.partitions_for_topics(topics))
        try:
            result[consumer] = {(tp.topic, tp.partition): str(th) for tp, th in assignor.assign(context).items()}
        except AssignmentError as exc:
            result[consumer] = f"AssignmentError: {exc}"
    return result


def compare(zk_connect: str, workdir: Path, cases: Sequence[GroupCase]) -> list[tuple[dict, dict]]:
    """Write every case, run the oracle once, and return (original, ours) per case, errors reduced to 'error'."""
    base = f"/{unique('oracle')}"
    oracle_cases = []
    mine = []
    probe = ZkProbe(zk_connect)
    try:  # one multi-op per case: ZooKeeper syncs its log once per write request, so this is many times faster
        probe.create(base)
        for i, case in enumerate(cases):
            transaction = probe.client.transaction()
            for path, data in case_nodes(f"{base}/c{i}", case):
                transaction.create(path, data)
            assert all(r == p for r, (p, _) in zip(transaction.commit(), case_nodes(f"{base}/c{i}", case),
                                                   strict=True)), f"case {i} not written"
    finally:
        probe.close()
    for i, case in enumerate(cases):
        with ZkClient(f"{zk_connect}{base}/c{i}", session_timeout_ms=10000, log_id="oracle-case") as zk:
            mine.append(ours(zk, case))
        oracle_cases.append(OracleCase(f"c{i}", case.strategy, case.exclude_internal, f"{zk_connect}{base}/c{i}",
                                       GROUP))
    theirs = run_assignor_oracle(oracle_cases, workdir)
    pairs = []
    for i in range(len(cases)):
        original = {c: "error" if isinstance(v, str) else v for c, v in theirs[f"c{i}"].items()}
        pairs.append((original, {c: "error" if isinstance(v, str) else v for c, v in mine[i].items()}))
    return pairs


def assert_same(cases: Sequence[GroupCase], pairs: list[tuple[dict, dict]]) -> None:
    for case, (original, mine) in zip(cases, pairs, strict=True):
        assert mine == original, f"assignors differ on {case}:\n original: {original}\n ours:     {mine}"


def static(cid: str, **topics: int) -> Member:
    return Member(cid, "static", tuple(topics.items()))


def group(strategy: str, topics: dict[str, int], *members: Member) -> GroupCase:
    return GroupCase(strategy, members, tuple((t, tuple(range(n))) for t, n in topics.items()))


def as_owners(assignments: dict) -> dict[str, str]:
    """'topic-partition' -> thread without the group prefix, merged over members."""
    return {f"{t}-{p}": th.removeprefix(f"{GROUP}_") for a in assignments.values() for (t, p), th in a.items()}


# Worked examples, both implementations must give these owners: RangeAssignor's own (its comment in
# kafka/consumer/PartitionAssignor.scala), an idle thread, string order (c-10 < c-2), independent topics; roundrobin's
# hash order, two topics, and hashes of "[t,10]", "[t,11]" that overflow to negative values.
CATALOGUE = [
    (group("range", {"t": 5}, static("C1", t=2), static("C2", t=2)),
     {"t-0": "C1-0", "t-1": "C1-0", "t-2": "C1-1", "t-3": "C2-0", "t-4": "C2-1"}),
    (group("range", {"t": 3}, static("a", t=1), static("b", t=3)),
     {"t-0": "a-0", "t-1": "b-0", "t-2": "b-1"}),
    (group("range", {"t": 12}, static("c", t=12)),
     {f"t-{p}": f"c-{i}" for p, i in enumerate([0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9])}),
    (group("range", {"orders": 4, "clicks": 3}, static("A", orders=1, clicks=2), static("B", orders=2)),
     {"orders-0": "A-0", "orders-1": "A-0", "orders-2": "B-0", "orders-3": "B-1",
      "clicks-0": "A-0", "clicks-1": "A-0", "clicks-2": "A-1"}),
    (group("roundrobin", {"t": 4}, static("c1", t=1), static("c2", t=1)),
     {"t-0": "c1-0", "t-1": "c2-0", "t-2": "c1-0", "t-3": "c2-0"}),
    (group("roundrobin", {"orders": 3, "payments": 3}, static("c1", orders=2, payments=2),
           static("c2", orders=2, payments=2)),
     {"orders-0": "c1-0", "orders-1": "c1-1", "orders-2": "c2-0",
      "payments-0": "c2-1", "payments-1": "c1-0", "payments-2": "c1-1"}),
    (group("roundrobin", {"t": 12}, static("c1", t=1), static("c2", t=1)),
     {f"t-{p}": "c1-0" if p % 2 == 0 else "c2-0" for p in range(12)}),
]


def test_worked_examples_on_both_assignors(zk_connect, tmp_path):
    cases = [case for case, _ in CATALOGUE]
    pairs = compare(zk_connect, tmp_path, cases)
    for (case, expected), (original, mine) in zip(CATALOGUE, pairs, strict=True):
        assert as_owners(original) == expected, case
        assert as_owners(mine) == expected, case


def test_roundrobin_fails_on_both_for_unequal_subscriptions(zk_connect, tmp_path):
    cases = [group("roundrobin", {"a": 2, "b": 2}, static("c1", a=1), static("c2", a=1, b=1)),  # fine from 0.10.2
             group("roundrobin", {"a": 2, "b": 2}, static("c1", a=1, b=2), static("c2", a=1, b=1)),
             group("roundrobin", {"a": 2}, Member("c1", "static"))]  # nobody subscribes to anything
    for original, mine in compare(zk_connect, tmp_path, cases):
        assert set(original.values()) == {"error"}
        assert mine == original


# --- hash ties: the one known difference -------------------------------------------------------------------

TIE = {"Aa": 2, "BB": 2}  # "[Aa,p]" and "[BB,p]" have the same Java String.hashCode for every p


def test_roundrobin_hash_ties_known_difference(zk_connect, tmp_path):
    """0.8.2.2 sorts pairs stably by hash, fed in the iteration order of the `mutable.HashMap`s that
    AssignmentContext builds from the member's own registration: tied topics share a bucket, whose chain is in
    reverse insertion order, so for a small subscription ties come out in *reverse registration order*. Ours
    breaks ties by (topic, partition). Documented in docs/interop.md; not reproduced (see there why)."""
    as_registered = group("roundrobin", TIE, static("c1", Aa=1, BB=1), static("c2", Aa=1, BB=1))
    reverse = group("roundrobin", TIE, static("c1", BB=1, Aa=1), static("c2", BB=1, Aa=1))
    disagreeing = group("roundrobin", TIE, static("c1", Aa=1, BB=1), static("c2", BB=1, Aa=1))
    (o1, m1), (o2, m2), (o3, m3) = compare(zk_connect, tmp_path, [as_registered, reverse, disagreeing])
    a_first = {"Aa-0": "c1-0", "Aa-1": "c1-0", "BB-0": "c2-0", "BB-1": "c2-0"}
    assert as_owners(m1) == as_owners(m2) == as_owners(m3) == a_first  # ours: registration order is irrelevant
    assert as_owners(o2) == a_first  # registered as (BB, Aa): the original agrees with ours
    assert as_owners(o1) == {"BB-0": "c1-0", "BB-1": "c1-0", "Aa-0": "c2-0", "Aa-1": "c2-0"}  # the difference
    # Members registered in different orders make the original disagree with itself: both target BB, nobody Aa,
    # so that group of original members never settles.
    assert o3 == {"g_c1": {("BB", 0): "g_c1-0", ("BB", 1): "g_c1-0"},
                  "g_c2": {("BB", 0): "g_c2-0", ("BB", 1): "g_c2-0"}}


# --- property: random groups ------------------------------------------------------------------------------

# The pool must stay free of hash ties (see TOPIC_POOL).
assert len({java_string_hashcode(f"[{t},{p}]") for t in TOPIC_POOL for p in range(16)}) == 16 * len(TOPIC_POOL)


def _alternation(topics: Sequence[str]) -> str:
    return "|".join(re.escape(t) if t != "a.b" else r"a\.b" for t in topics)  # dialect-neutral escapes only


@st.composite
def group_cases(draw) -> GroupCase:
    names = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=4, unique=True))
    exclude_internal = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        names.append(INTERNAL)  # wildcards must skip it unless exclude.internal.topics=false
    topics = []
    for name in names:
        kind = draw(st.sampled_from(["range", "range", "range", "sparse", "missing"]))
        if kind == "missing":
            topics.append((name, None))
        elif kind == "sparse":
            topics.append((name, tuple(sorted(draw(st.sets(st.integers(0, 15), max_size=6))))))
        else:
            topics.append((name, tuple(range(draw(st.integers(0, 12))))))
    cids = draw(st.lists(st.sampled_from(CONSUMER_POOL), min_size=1, max_size=5, unique=True))
    strategy = draw(st.sampled_from(["range", "roundrobin"]))
    homogeneous = draw(st.integers(0, 9)) < 6  # roundrobin's precondition holds for most generated groups
    common = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    members = []
    for cid in cids:
        streams = draw(st.integers(1, 12))
        pattern = draw(st.sampled_from(["static", "static", "white_list", "black_list"]))
        if homogeneous:
            members.append(Member(cid, "static", tuple((t, streams) for t in common)))
        elif pattern == "static":
            chosen = draw(st.lists(st.sampled_from(names), unique=True))
            members.append(Member(cid, "static", tuple((t, draw(st.integers(1, 12))) for t in chosen)))
        else:
            chosen = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            regex = draw(st.sampled_from([_alternation(chosen), ".*", "x.*|o.*", "[a-z]+"]))
            members.append(Member(cid, pattern, regex=regex, streams=streams))
    return GroupCase(strategy, tuple(members), tuple(topics), exclude_internal)


def check_random_groups(zk_connect: str, tmp_path: Path, cases: list[GroupCase]) -> None:
    workdir = tmp_path / unique("run")
    assert_same(cases, compare(zk_connect, workdir, cases))


# One JVM run per example (a batch of groups): few examples in the fast run, more in `make interop`. Shrinking is
# off because each step would start a JVM; the failure message names the differing group instead.
_FAST = settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                        HealthCheck.data_too_large])


# kazoo's connection threads (the session's ZooKeeper clients) draw ping jitter from the global `random` on every
# loop, so hypothesis may see its state move while it generates an example: not our strategies' doing.
_KAZOO_RANDOM = pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")


@_KAZOO_RANDOM
@_FAST
@given(cases=st.lists(group_cases(), min_size=20, max_size=20))
def test_random_groups_assigned_alike(zk_connect, tmp_path, cases):
    check_random_groups(zk_connect, tmp_path, cases)


# 800 random groups in 8 batches of 100: each batch starts one original JVM, so fewer and larger batches check as
# many groups in less time.
@pytest.mark.slow
@_KAZOO_RANDOM
@settings(_FAST, max_examples=8)
@given(cases=st.lists(group_cases(), min_size=100, max_size=100))
def test_many_random_groups_assigned_alike(zk_connect, tmp_path, cases):
    check_random_groups(zk_connect, tmp_path, cases)
