"""Differential tests against the original Kafka 0.8.2.2 consumer (docs/interop.md).

Every test here is marked `interop`; those that start several original JVMs each, or many oracle runs, are also
`slow`. `make test` (what CI runs) runs all of them; `make interop` runs this set alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_support import original_properties

from zkconsumer.interop.original import OriginalMember


@pytest.fixture
def originals(cluster, tmp_path: Path) -> Iterator:
    """Start original 0.8.2.2 members in the test's cluster (`wait=False` to start several at once, then
    `wait_ready()` each); every one is stopped at the end of the test, whatever happened."""
    started: list[OriginalMember] = []

    def start(group: str, consumer: str | None, *, topics: dict[str, int] | None = None, whitelist: str | None = None,
              blacklist: str | None = None, streams: int = 1, wait: bool = True, **overrides) -> OriginalMember:
        member = OriginalMember(original_properties(cluster.zookeeper_connect, group, consumer, **overrides),
                                workdir=tmp_path / "originals", topics=topics, whitelist=whitelist,
                                blacklist=blacklist, streams=streams, name=f"{group}-{consumer or len(started)}")
        started.append(member)  # before start: a start that fails half-way is stopped too
        return member.start(wait=wait)

    yield start
    for member in started:
        member.begin_stop()  # all shut down in parallel: each takes about half a second
    for member in started:
        member.stop()
