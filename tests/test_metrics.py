"""Yammer-style metrics: JMX-style naming, exact thread-safe counts, EWMA rates under a fake clock, registry."""

from __future__ import annotations

import json
import math
import threading

import pytest

from fetcher_manager.metrics import (
    Counter,
    Gauge,
    Meter,
    MetricsRegistry,
    Timer,
    metric_name,
    tag_matcher,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.mark.parametrize(
    ("args", "tags", "expected"),
    [
        (
            ("kafka.consumer", "ZookeeperConsumerConnector", "RebalanceRateAndTime"),
            {"clientId": "C"},
            "kafka.consumer:type=ZookeeperConsumerConnector,name=RebalanceRateAndTime,clientId=C",
        ),
        (
            ("kafka.consumer", "ZookeeperConsumerConnector", "OwnedPartitionsCount"),
            {"clientId": "C", "groupId": "G", "topic": "T"},
            "kafka.consumer:type=ZookeeperConsumerConnector,name=OwnedPartitionsCount,clientId=C,groupId=G,topic=T",
        ),
        (
            ("kafka.consumer", "ZookeeperConsumerConnector", "FetchQueueSize"),
            {"topic": "T", "clientId": "C", "threadId": 0},
            "kafka.consumer:type=ZookeeperConsumerConnector,name=FetchQueueSize,topic=T,clientId=C,threadId=0",
        ),
        (
            ("kafka.consumer", "ConsumerTopicMetrics", "MessagesPerSec"),
            {"clientId": "C", "topic": ""},
            "kafka.consumer:type=ConsumerTopicMetrics,name=MessagesPerSec,clientId=C",
        ),
        (
            ("kafka.server", "FetcherStats", "BytesPerSec"),
            {"clientId": "C", "brokerHost": None, "brokerPort": 9092},
            "kafka.server:type=FetcherStats,name=BytesPerSec,clientId=C,brokerPort=9092",
        ),
        (
            ("kafka.server", "FetcherLagMetrics", "ConsumerLag"),
            {"clientId": "C", "topic": "T", "partition": 0},
            "kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=C,topic=T,partition=0",
        ),
        (
            ("kafka.consumer", "ConsumerFetcherManager", "MaxLag"),
            {},
            "kafka.consumer:type=ConsumerFetcherManager,name=MaxLag",
        ),
    ],
)
def test_metric_name(args: tuple[str, str, str], tags: dict[str, object], expected: str) -> None:
    assert metric_name(*args, **tags) == expected


def test_meter_counts_exactly_across_threads() -> None:
    meter = Meter()
    threads_n, marks = 8, 5000

    def work() -> None:
        for i in range(marks):
            meter.mark(1 if i % 2 else 2)

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert meter.count == threads_n * (marks // 2) * 3


def test_meter_mean_rate(clock: FakeClock) -> None:
    meter = Meter(clock)
    assert meter.mean_rate == 0.0
    meter.mark(30)
    clock.advance(10)
    assert meter.mean_rate == pytest.approx(3.0)


def test_meter_one_minute_rate_follows_yammer_ewma(clock: FakeClock) -> None:
    meter = Meter(clock)
    meter.mark(50)
    assert meter.one_minute_rate == 0.0  # no 5 s tick has passed yet
    clock.advance(5)
    assert meter.one_minute_rate == pytest.approx(10.0)  # first tick: 50 events / 5 s
    alpha = 1 - math.exp(-5 / 60)
    clock.advance(5)
    assert meter.one_minute_rate == pytest.approx(10.0 * (1 - alpha))
    clock.advance(60)  # 12 idle ticks, applied in one go
    assert meter.one_minute_rate == pytest.approx(10.0 * (1 - alpha) ** 13)


def test_meter_steady_rate_converges(clock: FakeClock) -> None:
    meter = Meter(clock)
    for _ in range(120):  # 10 minutes at 4 events/s, marked once per tick
        meter.mark(20)
        clock.advance(5)
    assert meter.one_minute_rate == pytest.approx(4.0)
    assert meter.mean_rate == pytest.approx(4.0)


def test_meter_partial_tick_keeps_remainder(clock: FakeClock) -> None:
    meter = Meter(clock)
    clock.advance(7)  # one tick due; 2 s carried into the next interval
    meter.mark(10)
    clock.advance(3)  # reaches the second tick boundary (t=10): the 10 events count there
    alpha = 1 - math.exp(-5 / 60)
    assert meter.one_minute_rate == pytest.approx(alpha * 2.0)  # first (empty) tick initialised it to 0


def test_timer_stats(clock: FakeClock) -> None:
    timer = Timer(clock)
    assert (timer.count, timer.mean_ms, timer.max_ms, timer.min_ms) == (0, 0.0, 0.0, 0.0)
    with timer.time():
        clock.advance(0.25)
    timer.update(0.05)
    timer.update(0.15)
    timer.update(-1)  # ignored
    assert timer.count == 3
    assert timer.mean_ms == pytest.approx(150.0)
    assert timer.max_ms == pytest.approx(250.0)
    assert timer.min_ms == pytest.approx(50.0)
    clock.advance(2.75)
    assert timer.mean_rate == pytest.approx(1.0)  # 3 events in 3 s


def test_timer_records_failed_blocks(clock: FakeClock) -> None:
    timer = Timer(clock)
    with pytest.raises(RuntimeError), timer.time():
        clock.advance(1)
        raise RuntimeError("rebalance failed")
    assert timer.count == 1
    assert timer.max_ms == pytest.approx(1000.0)


def test_counter() -> None:
    counter = Counter()
    counter.inc()
    counter.inc(5)
    counter.dec(2)
    assert counter.count == 4


def test_gauge_reads_live_value() -> None:
    queue: list[int] = []
    gauge = Gauge(lambda: len(queue))
    assert gauge.value == 0
    queue.extend([1, 2, 3])
    assert gauge.value == 3


def test_registry_get_or_create_and_type_clash(clock: FakeClock) -> None:
    registry = MetricsRegistry(clock)
    name = metric_name("kafka.consumer", "ZookeeperConsumerConnector", "ZooKeeperCommitsPerSec", clientId="C")
    assert registry.meter(name) is registry.meter(name)
    assert registry.timer("t") is registry.timer("t")
    assert registry.counter("c") is registry.counter("c")
    with pytest.raises(TypeError, match="is a Meter, not a Timer"):
        registry.timer(name)
    assert registry.names() == sorted([name, "t", "c"])


def test_registry_concurrent_get_or_create_shares_one_meter() -> None:
    registry = MetricsRegistry()
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(1000):
            registry.meter("m").mark()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert registry.meter("m").count == 8000


def test_registry_gauge_replaces_and_reads_live() -> None:
    registry = MetricsRegistry()
    size = {"n": 1}
    registry.gauge("g", lambda: size["n"])
    size["n"] = 7
    assert registry.snapshot()["g"] == {"value": 7}
    registry.gauge("g", lambda: -1)
    assert registry.snapshot()["g"] == {"value": -1}
    assert registry.names() == ["g"]


def test_remove_and_remove_matching() -> None:
    registry = MetricsRegistry()

    def name(metric: str, client: str, **tags: object) -> str:
        return metric_name("kafka.consumer", "ZookeeperConsumerConnector", metric, clientId=client, **tags)

    for client in ("c1", "c10", "c2"):
        registry.meter(name("ZooKeeperCommitsPerSec", client))
        registry.gauge(name("OwnedPartitionsCount", client, groupId="g"), lambda: 0)
    assert registry.remove(name("ZooKeeperCommitsPerSec", "c2")) is True
    assert registry.remove(name("ZooKeeperCommitsPerSec", "c2")) is False
    # A plain substring also hits c10; the tag matcher does not.
    assert registry.remove_matching(tag_matcher("clientId", "c1")) == 2
    assert registry.remove_matching("clientId=c10") == 2
    assert registry.remove_matching(lambda n: n.endswith("groupId=g")) == 1
    assert registry.names() == []


def test_snapshot_is_plain_data(clock: FakeClock) -> None:
    registry = MetricsRegistry(clock)
    registry.meter("m").mark(10)
    with registry.timer("t").time():
        clock.advance(0.5)
    registry.counter("c").inc(3)
    registry.gauge("g", lambda: 42)
    clock.advance(4.5)
    snap = registry.snapshot()
    assert list(snap) == ["c", "g", "m", "t"]
    assert snap["c"] == {"count": 3}
    assert snap["g"] == {"value": 42}
    assert snap["m"] == {"count": 10, "mean_rate": pytest.approx(2.0), "one_minute_rate": pytest.approx(2.0)}
    assert set(snap["t"]) == {"count", "mean_rate", "one_minute_rate", "mean_ms", "max_ms", "min_ms"}
    assert snap["t"]["max_ms"] == pytest.approx(500.0)
    json.dumps(snap)  # only dicts, strs and numbers
    snap["m"]["count"] = 0  # a copy: mutating it does not touch the meter
    assert registry.meter("m").count == 10


def test_snapshot_gauge_may_use_the_registry() -> None:
    registry = MetricsRegistry()
    registry.gauge("count-of-metrics", lambda: len(registry.names()))
    assert registry.snapshot() == {"count-of-metrics": {"value": 1}}


def test_tag_matcher_is_exact_where_a_substring_is_not() -> None:
    c10 = metric_name("kafka.consumer", "ConsumerTopicMetrics", "BytesPerSec", clientId="c10", topic="t")
    c1 = metric_name("kafka.consumer", "ConsumerTopicMetrics", "BytesPerSec", clientId="c1", topic="t")
    assert "clientId=c1" in c10
    assert tag_matcher("clientId", "c1")(c10) is False
    assert tag_matcher("clientId", "c1")(c1) is True
    assert tag_matcher("topic", "t")(c1) is True
