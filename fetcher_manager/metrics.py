"""A tiny Yammer-style metrics registry keyed by Kafka's JMX-style names (``KafkaMetricsGroup.scala``).

Kafka 0.8 names metrics ``group:type=Type,name=Name,tag=value,...``; those names are the interface operators
know, and they do not fit Prometheus naming, so we keep a small registry of our own instead of a client library.
Meters and timers take an injectable ``clock`` (seconds, monotonic) so rate tests need no sleeping.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic
from typing import Any, TypeVar

Clock = Callable[[], float]

_TICK_SECONDS = 5.0  # Yammer ticks its moving averages every 5 s
_RESERVOIR_SIZE = 1028  # the sample size of Yammer's histograms (metrics-core 2.2 Histogram.DEFAULT_SAMPLE_SIZE)
_PERCENTILE_KEYS = (("p50", 0.5), ("p75", 0.75), ("p95", 0.95), ("p99", 0.99))
_ONE_MINUTE_ALPHA = 1.0 - math.exp(-_TICK_SECONDS / 60.0)


def metric_name(group: str, type_: str, name: str, **tags: object) -> str:
    """``group:type=T,name=N,k=v,...``; tags keep call order, tags whose value is None or "" are dropped.

    Tag keys use Kafka's spelling as keyword names (``clientId=``, ``brokerHost=``); values are str()-ed, so
    ``partition=0`` is kept (only empty values are dropped, as in ``KafkaMetricsGroup``).
    """
    parts = [f"{group}:type={type_}", f"name={name}"]
    parts += [f"{key}={value}" for key, value in tags.items() if value is not None and str(value) != ""]
    return ",".join(parts)


def tag_matcher(key: str, value: object) -> Callable[[str], bool]:
    """Predicate for ``remove_matching``: true when a name has exactly the tag ``key=value``.

    Prefer this to a substring: ``"clientId=c1"`` is also a substring of names tagged ``clientId=c10``.
    """
    wanted = f"{key}={value}"

    def matches(full_name: str) -> bool:
        _, _, props = full_name.partition(":")
        return wanted in props.split(",")

    return matches


class _OneMinuteEWMA:
    """Exponentially weighted moving average of a per-second rate, updated in 5 s ticks (not thread-safe)."""

    def __init__(self) -> None:
        self._uncounted = 0
        self._rate: float | None = None

    def update(self, n: int) -> None:
        self._uncounted += n

    def tick(self, ticks: int) -> None:
        """Apply ``ticks`` elapsed intervals: the first sees the events since the last tick, the rest see none."""
        instant = self._uncounted / _TICK_SECONDS
        self._uncounted = 0
        if self._rate is None:
            self._rate = instant
        else:
            self._rate += _ONE_MINUTE_ALPHA * (instant - self._rate)
        # Closed form of (ticks - 1) more empty ticks, so a long idle gap costs O(1) rather than a loop.
        self._rate *= (1.0 - _ONE_MINUTE_ALPHA) ** (ticks - 1)

    @property
    def rate(self) -> float:
        return self._rate or 0.0


class Meter:
    """Counts events and their rate: mean since creation and a one-minute EWMA (Yammer ``Meter``)."""

    def __init__(self, clock: Clock = monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._count = 0
        self._start = clock()
        self._last_tick = self._start
        self._m1 = _OneMinuteEWMA()

    def mark(self, n: int = 1) -> None:
        with self._lock:
            self._tick_if_necessary()
            self._count += n
            self._m1.update(n)

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def mean_rate(self) -> float:
        """Events per second since creation."""
        with self._lock:
            elapsed = self._clock() - self._start
            return self._count / elapsed if self._count and elapsed > 0 else 0.0

    @property
    def one_minute_rate(self) -> float:
        """Events per second, exponentially weighted over about the last minute."""
        with self._lock:
            self._tick_if_necessary()
            return self._m1.rate

    def _tick_if_necessary(self) -> None:
        # Ticks are applied lazily on mark/read (like Metrics 3) so no background thread is needed.
        age = self._clock() - self._last_tick
        if age >= _TICK_SECONDS:
            ticks = int(age // _TICK_SECONDS)
            self._last_tick += ticks * _TICK_SECONDS
            self._m1.tick(ticks)


class Timer:
    """Durations (reported in ms: count, mean, min, max) plus a meter of the timed events (Yammer ``Timer``)."""

    def __init__(self, clock: Clock = monotonic) -> None:
        self._clock = clock
        self._meter = Meter(clock)
        self._lock = threading.Lock()
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = 0.0

    @contextmanager
    def time(self) -> Iterator[None]:
        """Time the ``with`` block; failures are timed too (Kafka's ``KafkaTimer.time`` stops in ``finally``)."""
        start = self._clock()
        try:
            yield
        finally:
            self.update(self._clock() - start)

    def update(self, seconds: float) -> None:
        """Record one duration in seconds; negative durations are ignored, as in Yammer."""
        if seconds < 0:
            return
        with self._lock:
            self._count += 1
            self._sum += seconds
            self._min = min(self._min, seconds)
            self._max = max(self._max, seconds)
        self._meter.mark()

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def mean_ms(self) -> float:
        with self._lock:
            return self._sum * 1000.0 / self._count if self._count else 0.0

    @property
    def max_ms(self) -> float:
        with self._lock:
            return self._max * 1000.0 if self._count else 0.0

    @property
    def min_ms(self) -> float:
        with self._lock:
            return self._min * 1000.0 if self._count else 0.0

    @property
    def mean_rate(self) -> float:
        return self._meter.mean_rate

    @property
    def one_minute_rate(self) -> float:
        return self._meter.one_minute_rate


class Histogram:
    """A distribution of values (Yammer ``Histogram``): count, min, max and mean over every value recorded,
    and the 50th/75th/95th/99th percentiles over the most recent ``reservoir_size`` values.

    Kafka creates its histograms "biased" (an exponentially decaying sample that favours recent values); a
    window of the latest values favours them too, in bounded memory, and needs neither a clock nor randomness.
    """

    def __init__(self, reservoir_size: int = _RESERVOIR_SIZE) -> None:
        if reservoir_size < 1:
            raise ValueError("a histogram keeps at least one value")
        self._lock = threading.Lock()
        self._recent: deque[int | float] = deque(maxlen=reservoir_size)
        self._count = 0
        self._sum = 0.0
        self._min: int | float = 0
        self._max: int | float = 0

    def update(self, value: int | float) -> None:
        with self._lock:
            if self._count == 0:
                self._min = self._max = value
            else:
                self._min = min(self._min, value)
                self._max = max(self._max, value)
            self._count += 1
            self._sum += value
            self._recent.append(value)

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def min(self) -> int | float:
        with self._lock:
            return self._min

    @property
    def max(self) -> int | float:
        with self._lock:
            return self._max

    @property
    def mean(self) -> float:
        with self._lock:
            return self._sum / self._count if self._count else 0.0

    def percentile(self, quantile: float) -> float:
        """The value at ``quantile`` (0..1) of the recent values; 0.0 before the first update."""
        if not 0.0 <= quantile <= 1.0:
            raise ValueError(f"quantile {quantile} is not in [0, 1]")
        with self._lock:
            values = sorted(self._recent)
        return _quantile(values, quantile)

    def snapshot(self) -> dict[str, int | float]:
        """count, min, max, mean and p50/p75/p95/p99, all read at one instant (one lock, one sort)."""
        with self._lock:
            count, total, low, high = self._count, self._sum, self._min, self._max
            values = sorted(self._recent)
        data: dict[str, int | float] = {"count": count, "min": low, "max": high,
                                        "mean": total / count if count else 0.0}
        data.update((key, _quantile(values, q)) for key, q in _PERCENTILE_KEYS)
        return data


def _quantile(values: list[int | float], quantile: float) -> float:
    # metrics-core 2.2 Snapshot.getValue: linear interpolation at position quantile * (n + 1), clamped.
    if not values:
        return 0.0
    pos = quantile * (len(values) + 1)
    if pos < 1:
        return float(values[0])
    if pos >= len(values):
        return float(values[-1])
    lower, upper = values[int(pos) - 1], values[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


class Gauge:
    """A value read on demand from a zero-argument callable (e.g. a queue's size)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn

    @property
    def value(self) -> Any:
        return self._fn()


class Counter:
    """A thread-safe up/down count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def inc(self, n: int = 1) -> None:
        with self._lock:
            self._count += n

    def dec(self, n: int = 1) -> None:
        with self._lock:
            self._count -= n

    @property
    def count(self) -> int:
        with self._lock:
            return self._count


Metric = Meter | Timer | Histogram | Gauge | Counter
_M = TypeVar("_M", Meter, Timer, Histogram, Counter)


class MetricsRegistry:
    """Metrics by full name; get-or-create is atomic, so concurrent callers share one metric per name."""

    def __init__(self, clock: Clock = monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._metrics: dict[str, Metric] = {}

    def meter(self, name: str) -> Meter:
        return self._get_or_create(name, Meter, lambda: Meter(self._clock))

    def timer(self, name: str) -> Timer:
        return self._get_or_create(name, Timer, lambda: Timer(self._clock))

    def counter(self, name: str) -> Counter:
        return self._get_or_create(name, Counter, Counter)

    def histogram(self, name: str) -> Histogram:
        return self._get_or_create(name, Histogram, Histogram)

    def gauge(self, name: str, fn: Callable[[], Any]) -> Gauge:
        """Register (or replace: a re-created stream re-registers its queue-size gauge) a gauge."""
        gauge = Gauge(fn)
        with self._lock:
            self._metrics[name] = gauge
        return gauge

    def remove(self, name: str) -> bool:
        """Drop one metric; returns whether it existed."""
        with self._lock:
            return self._metrics.pop(name, None) is not None

    def remove_matching(self, match: str | Callable[[str], bool]) -> int:
        """Drop every metric whose name contains ``match`` (a substring) or satisfies it (a predicate).

        Used at shutdown to drop all metrics of a client id; see ``tag_matcher`` for an exact tag match.
        Returns how many were removed.
        """
        predicate = match if callable(match) else (lambda name: match in name)
        with self._lock:
            doomed = [name for name in self._metrics if predicate(name)]
            for name in doomed:
                del self._metrics[name]
        return len(doomed)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._metrics)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Plain-data view, sorted by name: meters give count/mean_rate/one_minute_rate, timers add
        mean_ms/max_ms/min_ms, histograms give count/min/max/mean/p50/p75/p95/p99, counters give count and
        gauges value."""
        with self._lock:
            items = sorted(self._metrics.items())
        # Read outside the lock: a gauge callable may itself touch the registry.
        return {name: _read(metric) for name, metric in items}

    def _get_or_create(self, name: str, kind: type[_M], factory: Callable[[], _M]) -> _M:
        with self._lock:
            metric = self._metrics.get(name)
            if metric is None:
                created = self._metrics[name] = factory()
                return created
            if not isinstance(metric, kind):
                raise TypeError(f"metric {name!r} is a {type(metric).__name__}, not a {kind.__name__}")
            return metric


def _read(metric: Metric) -> dict[str, Any]:
    if isinstance(metric, Gauge):
        return {"value": metric.value}
    if isinstance(metric, Counter):
        return {"count": metric.count}
    if isinstance(metric, Histogram):
        return metric.snapshot()
    data: dict[str, Any] = {
        "count": metric.count,
        "mean_rate": metric.mean_rate,
        "one_minute_rate": metric.one_minute_rate,
    }
    if isinstance(metric, Timer):
        data.update(mean_ms=metric.mean_ms, max_ms=metric.max_ms, min_ms=metric.min_ms)
    return data
