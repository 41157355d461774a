"""A lab run's members as its proxies see them: each member's own link through every ZooKeeper proxy (a port per
member and server) and through the shared Kafka proxy (found by client id), the connect string that sends a
member there, and the delays a scenario puts on those links ([[network]] rules, `delay` steps).
"""

from __future__ import annotations

from zkconsumer.lab.scenarios.model import Scenario
from zkconsumer.lab.wire.kafka import KafkaProxy
from zkconsumer.lab.wire.zk import ZkProxy


class MemberLinks:
    def __init__(self, scenario: Scenario, zk_proxies: list[ZkProxy], kafka_proxy: KafkaProxy, chroot: str) -> None:
        self.scenario = scenario
        self.zk_proxies = zk_proxies
        self.kafka_proxy = kafka_proxy
        self.chroot = chroot

    def connect(self, name: str) -> str:
        """Member `name`'s `zookeeper.connect`: its own port on every server's proxy, opened on first use."""
        for proxy in self.zk_proxies:
            if not has_port(proxy, name):
                proxy.add_link(name)
        return ",".join(f"{proxy.host}:{proxy.port(name)}" for proxy in self.zk_proxies) + self.chroot

    def apply_rules(self, name: str) -> None:
        """The scenario's [[network]] rules that cover member `name` (called before it connects)."""
        index = int(name[1:])
        for rule in self.scenario.network:
            selector = rule.members
            if selector.kind == "all" or index in selector.indices:
                self.delay(name, rule.target, rule.delay_ms, rule.jitter_ms)

    def delay(self, name: str, target: str, delay_ms: int, jitter_ms: int) -> None:
        if target == "zookeeper":
            for proxy in self.zk_proxies:
                proxy.delay(name, delay_ms, jitter_ms)
        else:
            self.kafka_proxy.delay(name, delay_ms, jitter_ms)

    def reset_kafka(self) -> None:
        """The Kafka proxy outlives a run (its links are named by client id): undo an earlier run's faults."""
        for link in self.kafka_proxy.links.values():
            link.restore()
            link.delay(0, 0)

    def zookeeper_ports(self) -> dict[str, int]:
        return {name: proxy.port(name) for proxy in self.zk_proxies for name in proxy.links if has_port(proxy, name)}


def has_port(proxy: ZkProxy, name: str) -> bool:
    try:
        proxy.port(name)
        return True
    except KeyError:
        return False
