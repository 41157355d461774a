"""The console consumer's configuration (zkconsumer/console.py `console_config`): the file's keys, then the
command line's, validated once; the ZooKeeper resolver is asked only when needed. Server-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkconsumer.config import ConfigError
from zkconsumer.console import console_config


def _never(zookeeper: str | None) -> str:
    raise AssertionError(f"resolver asked ({zookeeper!r}) although the file names zookeeper.connect")


def test_the_file_is_completed_by_the_command_line_and_the_command_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "consumer.properties"
    path.write_text("zookeeper.connect=127.0.0.1:2181/c\nauto.commit.interval.ms=1500\ngroup.id=from-file\n")
    config = console_config(path, None, _never, group="from-cli", from_beginning=True, timeout_ms=700,
                            consumer_id="me", overrides={"auto.commit.interval.ms": "2500"})
    assert (config.zookeeper_connect, config.group_id, config.consumer_id) == ("127.0.0.1:2181/c", "from-cli", "me")
    assert (config.auto_offset_reset, config.consumer_timeout_ms, config.auto_commit_interval_ms) == \
        ("smallest", 700, 2500)


def test_without_a_file_the_resolver_gives_zookeeper_and_a_fresh_group_is_made() -> None:
    asked: list[str | None] = []

    def resolve(zookeeper: str | None) -> str:
        asked.append(zookeeper)
        return "127.0.0.1:2999"

    first = console_config(None, None, resolve)
    second = console_config(None, "127.0.0.1:3000", lambda z: z or "unused")
    assert asked == [None] and first.zookeeper_connect == "127.0.0.1:2999"
    assert second.zookeeper_connect == "127.0.0.1:3000"
    assert first.group_id.startswith("console-consumer-")


def test_a_bad_value_from_either_side_is_refused_by_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset"):
        console_config(None, "127.0.0.1:1", lambda z: z or "", overrides={"auto.offset.reset": "sometimes"})
