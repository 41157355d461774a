"""Pins what mutation testing found unpinned in the assignment context, the stream bindings and the
subscriptions: Java's UTF-16 string order (0.8.2 sorts consumers and thread ids with String.compareTo), which
queue or stream a binding hands out, and the user-facing parts of subscriptions (docs/mutation.md)."""

from __future__ import annotations

import pytest

from rebalance.assignment import AssignmentContext, ConsumerThreadId
from rebalance.bindings import StreamBindings
from rebalance.subscription import INTERNAL_TOPICS, Blacklist, Registration, Whitelist

# U+10000 is the surrogate pair D800 DC00 in UTF-16: before U+E000 for Java, after it in code-point order.
SUPPLEMENTARY, PRIVATE_USE = "\U00010000", "\ue000"


def test_thread_ids_order_by_utf16_code_units_as_java_does() -> None:
    java_first = ConsumerThreadId(f"c{SUPPLEMENTARY}", 0)
    java_second = ConsumerThreadId(f"c{PRIVATE_USE}", 0)
    assert java_first < java_second and not java_second < java_first
    assert sorted([java_second, java_first]) == [java_first, java_second]


def test_a_lone_surrogate_in_a_consumer_id_still_orders() -> None:
    """A registration written by another client may carry any Java string, lone surrogates included."""
    lone = ConsumerThreadId("a\ud800", 0)
    assert lone < ConsumerThreadId("b", 0)
    assert ConsumerThreadId("b", 0) > lone


def test_a_thread_id_is_not_less_than_itself() -> None:
    one = ConsumerThreadId("c", 1)
    assert not one < ConsumerThreadId("c", 1)
    assert one <= ConsumerThreadId("c", 1) and one == ConsumerThreadId("c", 1)


def test_the_context_lists_consumers_in_java_order() -> None:
    subscriptions = {f"g_{PRIVATE_USE}": {"t": 1}, f"g_{SUPPLEMENTARY}": {"t": 1}}
    context = AssignmentContext.build(f"g_{PRIVATE_USE}", subscriptions, {"t": [0, 1]})
    assert context.consumers == (f"g_{SUPPLEMENTARY}", f"g_{PRIVATE_USE}")
    assert [str(t) for t in context.consumers_for_topic["t"]] == [f"g_{SUPPLEMENTARY}-0", f"g_{PRIVATE_USE}-0"]


class Clearable:
    def __init__(self) -> None:
        self.cleared = 0

    def clear(self) -> None:
        self.cleared += 1


def bound() -> tuple[StreamBindings, dict[str, Clearable]]:
    parts = {name: Clearable() for name in ("q1", "s1", "q2", "s2")}
    bindings = StreamBindings()
    bindings.bind("t1", ConsumerThreadId("c", 0), parts["q1"], parts["s1"])  # type: ignore[arg-type]
    bindings.bind("t2", ConsumerThreadId("c", 1), parts["q2"], parts["s2"])  # type: ignore[arg-type]
    return bindings, parts


def test_queue_for_hands_out_the_queue_not_the_stream() -> None:
    bindings, parts = bound()
    assert bindings.queue_for("t1", ConsumerThreadId("c", 0)) is parts["q1"]
    with pytest.raises(KeyError, match="no stream is bound to topic 't1' thread c-1"):
        bindings.queue_for("t1", ConsumerThreadId("c", 1))


def test_clear_empties_only_the_given_topics_queues_and_every_stream() -> None:
    bindings, parts = bound()
    bindings.clear(["t1"])
    assert (parts["q1"].cleared, parts["q2"].cleared) == (1, 0)
    assert (parts["s1"].cleared, parts["s2"].cleared) == (1, 1)  # Kafka's closeFetchers clears every stream


def test_queues_and_streams_are_distinct_objects_each_once() -> None:
    bindings, parts = bound()
    shared = Clearable()
    bindings.bind("t3", ConsumerThreadId("c", 0), parts["q1"], shared)  # type: ignore[arg-type]
    assert bindings.queues() == [parts["q1"], parts["q2"]]  # a wildcard's queue serves several topics: once
    assert bindings.streams() == [parts["s1"], parts["s2"], shared]


def test_an_invalid_regex_error_names_the_regex_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"'a\(' is an invalid topic regex .*: fix the whitelist/blacklist"):
        Whitelist("a(")


def test_internal_topics_are_excluded_by_default_from_both_filters() -> None:
    internal = next(iter(INTERNAL_TOPICS))
    assert not Blacklist("nothing").is_topic_allowed(internal)
    assert Blacklist("nothing").is_topic_allowed(internal, exclude_internal_topics=False)
    assert not Whitelist(".*").is_topic_allowed(internal)


def test_registrations_keep_their_timestamp() -> None:
    assert Registration.static({"t": 1}, timestamp="1700000000000").timestamp == "1700000000000"
    assert Registration.wildcard(Whitelist("t.*"), 2, timestamp="17").timestamp == "17"
