"""ConsumerConfig: Kafka 0.8.2 defaults, derived defaults, .properties parsing, validation, round trip."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from zkconsumer.config import ConfigError, ConsumerConfig

BASE = {"group.id": "group1", "zookeeper.connect": "zk1:2181"}


def make(**extra: object) -> ConsumerConfig:
    return ConsumerConfig.from_properties({**BASE, **extra})


@pytest.mark.parametrize(
    ("field", "default"),
    [
        ("consumer_id", None),
        ("zookeeper_session_timeout_ms", 6000),
        ("zookeeper_connection_timeout_ms", 6000),
        ("zookeeper_sync_time_ms", 2000),
        ("rebalance_max_retries", 4),
        ("rebalance_backoff_ms", 2000),
        ("refresh_leader_backoff_ms", 200),
        ("auto_commit_enable", True),
        ("auto_commit_interval_ms", 60000),
        ("auto_offset_reset", "largest"),
        ("fetch_message_max_bytes", 1048576),
        ("fetch_min_bytes", 1),
        ("fetch_wait_max_ms", 100),
        ("fetch_max_bytes", 52428800),
        ("num_consumer_fetchers", 1),
        ("queued_max_message_chunks", 2),
        ("consumer_timeout_ms", -1),
        ("socket_timeout_ms", 30000),
        ("socket_receive_buffer_bytes", 65536),
        ("client_id", "group1"),
        ("exclude_internal_topics", True),
        ("partition_assignment_strategy", "range"),
        ("offsets_storage", "zookeeper"),
        ("dual_commit_enabled", False),
        ("offsets_channel_backoff_ms", 1000),
        ("offsets_channel_socket_timeout_ms", 10000),
        ("offsets_commit_max_retries", 5),
        ("zkconsumer_incremental_ownership", False),
        ("zkconsumer_patient_membership_ms", 0),
        ("zkconsumer_claim_on_deletion", False),
        ("zkconsumer_consensus_barrier", False),
    ],
)
def test_spec_defaults(field: str, default: object) -> None:
    value = getattr(make(), field)
    assert value == default
    assert type(value) is type(default)


def test_every_field_has_a_default_test_and_maps_to_a_dotted_key() -> None:
    names = [f.name for f in dataclasses.fields(ConsumerConfig) if f.init]
    # the 29 keys of Kafka 0.8.2 ConsumerConfig + ZKConfig, 9 ZooKeeper security keys (docs/security.md) and the 4
    # opt-in modes (docs/modes.md)
    assert len(names) == 29 + 9 + 4
    assert all("_" in n for n in names)


def test_direct_construction_is_validated_and_coerced() -> None:
    cfg = ConsumerConfig("g", "zk:2181", zookeeper_session_timeout_ms="7000")  # type: ignore[arg-type]
    assert cfg.zookeeper_session_timeout_ms == 7000
    with pytest.raises(ConfigError, match=r"group\.id is required"):
        ConsumerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.group_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("extra", "field", "expected"),
    [
        ({"zookeeper.session.timeout.ms": "9000"}, "zookeeper_connection_timeout_ms", 9000),
        (
            {"zookeeper.session.timeout.ms": 9000, "zookeeper.connection.timeout.ms": 100},
            "zookeeper_connection_timeout_ms",
            100,
        ),
        ({"zookeeper.sync.time.ms": "500"}, "rebalance_backoff_ms", 500),
        ({"zookeeper.sync.time.ms": 500, "rebalance.backoff.ms": 50}, "rebalance_backoff_ms", 50),
        ({"group.id": "other.group"}, "client_id", "other.group"),
        ({"client.id": "my-client"}, "client_id", "my-client"),
        ({"offsets.storage": "zookeeper"}, "dual_commit_enabled", False),
        ({"dual.commit.enabled": "true"}, "dual_commit_enabled", True),
        ({"offsets.storage": "kafka"}, "dual_commit_enabled", True),  # 0.8.2: dual commit on with Kafka storage
        ({"offsets.storage": "KAFKA", "dual.commit.enabled": "false"}, "dual_commit_enabled", False),
    ],
)
def test_derived_defaults(extra: dict[str, object], field: str, expected: object) -> None:
    assert getattr(make(**extra), field) == expected


def test_kafka_offset_storage_is_accepted_and_round_trips() -> None:
    config = make(**{"offsets.storage": "Kafka", "offsets.commit.max.retries": 2})
    assert (config.offsets_storage, config.dual_commit_enabled, config.offsets_commit_max_retries) == ("kafka", True, 2)
    again = ConsumerConfig.from_properties(config.to_properties())
    assert again == config
    assert config.with_overrides(offsets_storage="zookeeper").dual_commit_enabled is False  # re-derived


def test_with_overrides_rederives_only_defaulted_fields() -> None:
    cfg = make(**{"rebalance.backoff.ms": 10})
    changed = cfg.with_overrides(group_id="g2", zookeeper_session_timeout_ms=8000, zookeeper_sync_time_ms=1)
    assert changed.client_id == "g2"
    assert changed.zookeeper_connection_timeout_ms == 8000
    assert changed.rebalance_backoff_ms == 10  # set explicitly, so it stays
    assert cfg.client_id == "group1"  # original untouched
    with pytest.raises(ConfigError, match=r"rebalance\.max\.retries=0"):
        cfg.with_overrides(rebalance_max_retries=0)
    with pytest.raises(TypeError, match="no_such_field"):
        cfg.with_overrides(no_such_field=1)


def test_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "consumer.properties"
    path.write_text(
        "# consumer settings\n"
        "! a bang comment\n"
        "group.id=orders-readers\n"
        "zookeeper.connect: zk1:2181,zk2:2181/kafka\n"
        "   auto.offset.reset = smallest\n"
        "auto.commit.enable=FALSE\n"
        "consumer.timeout.ms=-1\n"
        "fetch.message.max.bytes 2097152\n"
        "partition.assignment.strategy=roundrobin\n"
        "client.id=reader\\\n"
        "    -1\n",
        encoding="utf-8",
    )
    for source in (path, str(path)):
        cfg = ConsumerConfig.from_properties(source)
        assert cfg.group_id == "orders-readers"
        assert cfg.zookeeper_connect == "zk1:2181,zk2:2181/kafka"
        assert (cfg.zk_hosts, cfg.zk_chroot) == ("zk1:2181,zk2:2181", "/kafka")
        assert cfg.auto_offset_reset == "smallest"
        assert cfg.auto_commit_enable is False
        assert cfg.fetch_message_max_bytes == 2097152
        assert cfg.partition_assignment_strategy == "roundrobin"
        assert cfg.client_id == "reader-1"


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match=r"nope\.properties.*does not exist"):
        ConsumerConfig.from_properties(missing)


def test_directory_instead_of_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        ConsumerConfig.from_properties(tmp_path)


@pytest.mark.parametrize("key", ["group.id", "zookeeper.connect"])
def test_missing_required_key(key: str) -> None:
    props = dict(BASE)
    del props[key]
    with pytest.raises(ConfigError, match="^" + re.escape(key) + " is required"):
        ConsumerConfig.from_properties(props)


def test_unknown_key_warns_but_does_not_fail(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkconsumer.config"):
        cfg = make(**{"groupid": "typo", "fetch.size": "1"})
    assert cfg.group_id == "group1"
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Property groupid is not valid" in m for m in messages)
    assert any("Property fetch.size is not valid" in m for m in messages)


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("zookeeper.session.timeout.ms", "6001", 6001),
        ("zookeeper.session.timeout.ms", 6001, 6001),
        ("zookeeper.session.timeout.ms", " 6001 ", 6001),
        ("consumer.timeout.ms", "-5", -5),
        ("auto.commit.enable", "TRUE", True),
        ("auto.commit.enable", "false", False),
        ("auto.commit.enable", False, False),
        ("exclude.internal.topics", "False", False),
        ("offsets.storage", "ZooKeeper", "zookeeper"),
        ("consumer.id", "consumer1", "consumer1"),
        ("consumer.id", None, None),
        ("fetch.min.bytes", 0, 0),
        ("partition.assignment.strategy", "roundrobin-0.10.2", "roundrobin-0.10.2"),
        ("partition.assignment.strategy", "sticky", "sticky"),
    ],
)
def test_value_coercion(key: str, raw: object, expected: object) -> None:
    assert getattr(make(**{key: raw}), key.replace(".", "_")) == expected


def test_from_dict_alias() -> None:
    assert ConsumerConfig.from_dict(BASE) == make()


@pytest.mark.parametrize(
    ("key", "value", "hint"),
    [
        ("group.id", "my group", "only ASCII letters"),
        ("group.id", "a/b", "only ASCII letters"),
        ("group.id", "", "non-empty"),
        ("group.id", "..", "ZooKeeper forbids"),
        ("client.id", "client!", "only ASCII letters"),
        ("client.id", "", "non-empty"),
        ("consumer.id", "c/1", "only ASCII letters"),
        ("consumer.id", "", "non-empty"),
        ("auto.offset.reset", "earliest", "allowed values are 'smallest', 'largest'"),
        ("auto.offset.reset", "Smallest", "allowed values are"),
        ("offsets.storage", "redis", "allowed values are 'zookeeper', 'kafka'"),
        ("partition.assignment.strategy", "cooperative-sticky", "'range', 'roundrobin', 'roundrobin-0.10.2', 'sticky'"),
        ("zookeeper.session.timeout.ms", "abc", "expected an integer"),
        ("zookeeper.session.timeout.ms", "60.5", "expected an integer"),
        ("zookeeper.session.timeout.ms", 6.0, "expected an integer"),
        ("zookeeper.session.timeout.ms", True, "expected an integer"),
        ("zookeeper.session.timeout.ms", 0, "must be >= 1"),
        ("zookeeper.session.timeout.ms", 2**31, "32-bit"),
        ("zookeeper.connection.timeout.ms", 0, "must be >= 1"),
        ("zookeeper.sync.time.ms", -1, "must be >= 0"),
        ("rebalance.max.retries", 0, "must be >= 1"),
        ("rebalance.backoff.ms", -1, "must be >= 0"),
        ("refresh.leader.backoff.ms", -1, "must be >= 0"),
        ("auto.commit.interval.ms", 0, "must be >= 1"),
        ("fetch.message.max.bytes", 0, "must be >= 1"),
        ("fetch.min.bytes", -1, "must be >= 0"),
        ("fetch.wait.max.ms", -1, "must be >= 0"),
        ("fetch.wait.max.ms", 30001, "socket.timeout.ms"),
        ("fetch.max.bytes", 0, "must be >= 1"),
        ("num.consumer.fetchers", 0, "must be >= 1"),
        ("queued.max.message.chunks", 0, "must be >= 1"),
        ("socket.timeout.ms", 0, "must be >= 1"),
        ("socket.receive.buffer.bytes", 0, "must be >= 1"),
        ("offsets.channel.backoff.ms", -1, "must be >= 0"),
        ("offsets.channel.socket.timeout.ms", 0, "must be >= 1"),
        ("offsets.commit.max.retries", -1, "must be >= 0"),
        ("auto.commit.enable", "yes", "expected true or false"),
        ("auto.commit.enable", 1, "expected true or false"),
        ("group.id", 42, "expected a string"),
        ("zookeeper.connect", "", "no host:port"),
        ("zookeeper.connect", "zk1", "is not host:port"),
        ("zookeeper.connect", ":2181", "is not host:port"),
        ("zookeeper.connect", "zk1:abc", "not a number"),
        ("zookeeper.connect", "zk1:0", "not a number in 1..65535"),
        ("zookeeper.connect", "zk1:70000", "not a number in 1..65535"),
        ("zookeeper.connect", "zk1:2181,", "is not host:port"),
        ("zookeeper.connect", "zk1:2181,zk2", "is not host:port"),
        ("zookeeper.connect", "zk1:2181/", "must not end with '/'"),
        ("zookeeper.connect", "zk1:2181/kafka/", "must not end with '/'"),
        ("zookeeper.connect", "zk1:2181/a//b", "empty, '.' or '..'"),
        ("zookeeper.connect", "zk1:2181/a/../b", "empty, '.' or '..'"),
        ("zookeeper.connect", "zk 1:2181", "is not host:port"),
    ],
)
def test_validation_names_key_and_value(key: str, value: object, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**{key: value})
    message = str(info.value)
    assert message.startswith(f"{key}=")
    assert repr(value) in message
    assert hint in message
    assert "\n" not in message


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_error_message_matches_documented_example() -> None:
    with pytest.raises(ConfigError) as info:
        make(**{"auto.offset.reset": "earliest"})
    expected = "auto.offset.reset='earliest' is invalid: allowed values are 'smallest', 'largest'"
    assert str(info.value) == expected


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot"),
    [
        ("zk1:2181", "zk1:2181", None),
        ("zk1:2181,zk2:2182,zk3:2183", "zk1:2181,zk2:2182,zk3:2183", None),
        ("zk1:2181/kafka", "zk1:2181", "/kafka"),
        ("zk1:2181,zk2:2181/kafka/prod", "zk1:2181,zk2:2181", "/kafka/prod"),
        ("127.0.0.1:2181", "127.0.0.1:2181", None),
        ("[::1]:2181/k", "[::1]:2181", "/k"),
    ],
)
def test_zk_hosts_and_chroot(connect: str, hosts: str, chroot: str | None) -> None:
    cfg = make(**{"zookeeper.connect": connect})
    assert (cfg.zk_hosts, cfg.zk_chroot) == (hosts, chroot)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"consumer.id": "c1", "client.id": "cl", "auto.offset.reset": "smallest"},
        {"zookeeper.session.timeout.ms": 400, "auto.commit.enable": False, "dual.commit.enabled": True},
        {"partition.assignment.strategy": "roundrobin-0.10.2", "consumer.timeout.ms": 10},
    ],
)
def test_to_properties_round_trips(extra: dict[str, object]) -> None:
    cfg = make(**extra)
    props = cfg.to_properties()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
    assert ConsumerConfig.from_properties(props) == cfg
    assert ("consumer.id" in props) == (cfg.consumer_id is not None)


def test_to_properties_round_trips_through_a_file(tmp_path: Path) -> None:
    cfg = make(**{"consumer.id": "c1", "zookeeper.connect": "a:1,b:2/chroot"})
    path = tmp_path / "out.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in cfg.to_properties().items()), encoding="utf-8")
    assert ConsumerConfig.from_properties(path) == cfg


def test_to_properties_uses_kafka_spelling() -> None:
    props = make().to_properties()
    assert props["auto.commit.enable"] == "true"
    assert props["zookeeper.connection.timeout.ms"] == "6000"
    assert props["client.id"] == "group1"
    assert "consumer.id" not in props
