"""Wire counting that does not trust the clients: TCP proxies that decode ZooKeeper and Kafka frames into
records and per-link counters, with per-link delay and cuts, plus a ZooKeeper `mntr` sampler. See docs/wire.md.
"""

from zkconsumer.lab.wire.connection import C2S, S2C, Connection
from zkconsumer.lab.wire.kafka import KafkaProxy, KafkaRecord, KafkaStreamDecoder
from zkconsumer.lab.wire.links import BLACKHOLE, RESET, Counters, Link
from zkconsumer.lab.wire.mntr import MntrSampler, mntr, parse_mntr
from zkconsumer.lab.wire.sinks import JsonLinesSink, RecordCollector
from zkconsumer.lab.wire.tcp import TcpProxy
from zkconsumer.lab.wire.zk import ZkProxy, ZkRecord, ZkStreamDecoder

__all__ = [
    "BLACKHOLE",
    "C2S",
    "RESET",
    "S2C",
    "Connection",
    "Counters",
    "JsonLinesSink",
    "KafkaProxy",
    "KafkaRecord",
    "KafkaStreamDecoder",
    "Link",
    "MntrSampler",
    "RecordCollector",
    "TcpProxy",
    "ZkProxy",
    "ZkRecord",
    "ZkStreamDecoder",
    "mntr",
    "parse_mntr",
]
