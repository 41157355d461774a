"""Which fetcher thread of a broker serves a partition: Kafka's ``AbstractFetcherManager.getFetcherId``.

``java_string_hashcode`` is also the sort key of the 0.8.2 roundrobin assignor, which imports it from here
(imports point rebalance -> fetcher_manager).
"""

from __future__ import annotations


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value >= 0x80000000 else value


def java_string_hashcode(text: str) -> int:
    """``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, in signed 32-bit arithmetic."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """``Utils.abs(31 * topic.hashCode() + partition) % numFetchers`` with the Scala ``kafka.utils.Utils.abs``
    (``math.abs``, except that MIN_INT maps to 0; not the Java clients' ``n & 0x7fffffff``)."""
    value = _int32(31 * java_string_hashcode(topic) + partition)
    return (0 if value == -(2**31) else abs(value)) % num_fetchers
