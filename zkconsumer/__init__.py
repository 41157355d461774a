"""Kafka 0.8's ZooKeeper-balanced high-level consumer, rebuilt in Python.

    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector
    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "localhost:2181"})
    with ZookeeperConsumerConnector(config) as connector:
        for message in connector.create_message_streams({"clicks": 1})["clicks"][0]:
            ...

Names are imported on first use: `import zkconsumer` (and every CLI command that does not consume) does not
load kafka-python or the fetcher, which keeps the start of the lab's many member processes cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Blacklist": "rebalance.subscription",
    "ConfigError": "zkconsumer.config",
    "ConsumerConfig": "zkconsumer.config",
    "ConsumerRebalanceFailedError": "rebalance.listener",
    "ConsumerRebalanceListener": "rebalance.listener",
    "ConsumerRegistrationError": "zkconsumer.registration",
    "ConsumerTimeoutError": "fetcher_manager.stream",
    "KafkaStream": "fetcher_manager.stream",
    "MemberEvent": "rebalance.events",
    "MemberState": "rebalance.events",
    "MessageStreamsExistError": "zkconsumer.connector",
    "Whitelist": "rebalance.subscription",
    "ZookeeperConsumerConnector": "zkconsumer.connector",
}

__all__ = [
    "Blacklist", "ConfigError", "ConsumerConfig", "ConsumerRebalanceFailedError", "ConsumerRebalanceListener",
    "ConsumerRegistrationError", "ConsumerTimeoutError", "KafkaStream", "MemberEvent", "MemberState",
    "MessageStreamsExistError", "Whitelist", "ZookeeperConsumerConnector",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zkconsumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from fetcher_manager.stream import ConsumerTimeoutError, KafkaStream
    from rebalance.events import MemberEvent, MemberState
    from rebalance.listener import ConsumerRebalanceFailedError, ConsumerRebalanceListener
    from rebalance.subscription import Blacklist, Whitelist
    from zkconsumer.config import ConfigError, ConsumerConfig
    from zkconsumer.connector import MessageStreamsExistError, ZookeeperConsumerConnector
    from zkconsumer.registration import ConsumerRegistrationError
