"""Byte-exact znode formats (what a Scala 0.8.2 peer writes and reads) and clear errors for bad data."""

from __future__ import annotations

import re

import pytest

from fetcher_manager.broker import Broker
from rebalance.subscription import Blacklist, Registration, Whitelist, normalise_regex
from zkconsumer.registration import make_consumer_id
from zkconsumer.zookeeper import codecs


def test_static_registration_is_scala_compact_json_in_key_order():
    registration = Registration.static({"orders": 2, "clicks": 1})
    data = codecs.encode_registration(registration, timestamp_ms=1400000000000)
    assert data == (
        b'{"version":1,"subscription":{"orders":2,"clicks":1},"pattern":"static","timestamp":"1400000000000"}'
    )


def test_wildcard_registration_normalises_and_escapes_like_topic_filter():
    whitelist = Whitelist(' "foo.*, bar/baz" ')
    assert whitelist.regex == "foo.*|bar/baz"
    data = codecs.encode_registration(Registration.wildcard(whitelist, 3), timestamp_ms=1)
    assert data == b'{"version":1,"subscription":{"foo.*|bar\\/baz":3},"pattern":"white_list","timestamp":"1"}'
    decoded = codecs.decode_registration("/p", data)
    assert decoded.topic_filter().regex == "foo.*|bar/baz"
    assert decoded.topic_streams(["foo1", "bar/baz", "xfoo", "__consumer_offsets"]) == {"bar/baz": 3, "foo1": 3}


def test_json_escape_matches_kafka_utils():
    assert codecs.json_escape('a"b\\c/d\te\x01\x7f\x9f') == 'a\\"b\\\\c\\/d\\te\\u0001\\u007F\\u009F'


def test_blacklist_and_internal_topics():
    blacklist = Blacklist("secret.*")
    reg = Registration.wildcard(blacklist, 1)
    assert reg.topic_streams(["a", "secret1", "__consumer_offsets"]) == {"a": 1}
    assert reg.topic_streams(["__consumer_offsets"], exclude_internal_topics=False) == {"__consumer_offsets": 1}
    assert Whitelist(".*").is_topic_allowed("__consumer_offsets") is False


def test_full_match_semantics():
    assert not Whitelist("foo").matches("foobar")
    assert normalise_regex("'a , b'") == "a|b"


def test_empty_wildcard_map_or_unknown_pattern_is_static():
    assert not Registration("white_list", {}).is_wildcard
    assert Registration("weird", {"t": 1}).topic_streams(["x"]) == {"t": 1}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "not JSON"),
        (b'{"version":1,"subscription":{"t":1', "not JSON"),
        (b'{"version":1,"subscription":{"t":1}}', "missing key 'pattern'"),
        (b'{"version":1,"pattern":"static"}', "missing key 'subscription'"),
        (b'{"pattern":"static","subscription":{"t":"two"}}', "non-negative integer"),
        (b"[1,2]", "expected a JSON object"),
        (None, "no data"),
    ],
)
def test_bad_registrations_name_path_and_content(raw, reason):
    with pytest.raises(codecs.ZnodeDataError) as info:
        codecs.decode_registration("/consumers/g/ids/x", raw)
    assert "/consumers/g/ids/x" in str(info.value) and reason in str(info.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"version":1,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1"}', Broker(1, "h1", 9092)),
        (b'{"version":2,"host":"h1","port":9092,"endpoints":["PLAINTEXT://h2:9093"]}', Broker(1, "h2", 9093)),
        (b'{"version":4,"host":null,"port":-1,"endpoints":["SSL://s:1","INTERNAL://h3:9094"],'
         b'"listener_security_protocol_map":{"SSL":"SSL","INTERNAL":"PLAINTEXT"}}', Broker(1, "h3", 9094)),
        (codecs.encode_broker(Broker(1, "127.0.0.1", 5555)), Broker(1, "127.0.0.1", 5555)),
    ],
)
def test_broker_registrations_v1_to_v5(raw, expected):
    assert codecs.decode_broker("/brokers/ids/1", 1, raw) == expected


def test_topic_partitions_sorted_numerically_and_bad_keys_rejected():
    assert codecs.decode_topic_partitions("/t", b'{"version":1,"partitions":{"10":[1],"2":[1],"0":[1]}}') == [0, 2, 10]
    with pytest.raises(codecs.ZnodeDataError, match="integers"):
        codecs.decode_topic_partitions("/t", b'{"version":1,"partitions":{"a":[1]}}')
    assert codecs.decode_topic_partitions("/t", codecs.encode_topic({0: [111], 1: [111]})) == [0, 1]


def test_offsets():
    assert codecs.decode_offset("/o", b"42") == 42
    with pytest.raises(codecs.ZnodeDataError, match="decimal"):
        codecs.decode_offset("/o", b"4x2")


def test_consumer_id_formats():
    assert make_consumer_id("g", "c1") == "g_c1"
    generated = make_consumer_id("g")
    assert re.fullmatch(r"g_.+-\d{13}-[0-9a-f]{1,8}", generated), generated
