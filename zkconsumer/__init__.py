"""Kafka 0.8's ZooKeeper-balanced high-level consumer, rebuilt in Python.

    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector
    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "localhost:2181"})
    with ZookeeperConsumerConnector(config) as connector:
        for message in connector.create_message_streams({"clicks": 1})["clicks"][0]:
            ...
"""

from fetcher_manager.stream import ConsumerTimeoutError, KafkaStream
from rebalance.listener import ConsumerRebalanceFailedError, ConsumerRebalanceListener
from rebalance.subscription import Blacklist, Whitelist
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.connector import MessageStreamsExistError, ZookeeperConsumerConnector
from zkconsumer.registration import ConsumerRegistrationError

__all__ = [
    "Blacklist",
    "ConfigError",
    "ConsumerConfig",
    "ConsumerRebalanceFailedError",
    "ConsumerRebalanceListener",
    "ConsumerRegistrationError",
    "ConsumerTimeoutError",
    "KafkaStream",
    "MessageStreamsExistError",
    "Whitelist",
    "ZookeeperConsumerConnector",
]
