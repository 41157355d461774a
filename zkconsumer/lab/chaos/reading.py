"""Who read which partition when, from the members' `consume` records: reading spans, and the windows in which two
members read one partition at once (invariant 5, docs/chaos.md).

A span is a member's run of consume records of one partition with no pause longer than SPAN_GAP_S (the load gives
every partition a message several times a second). Two spans of different members that overlap in time are an
overlap window: both were handing out that partition's messages at once. Its `messages` are the offsets both read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SPAN_GAP_S = 2.0


@dataclass
class Span:
    member: str
    first_ts: float
    last_ts: float
    offsets: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Overlap:
    partition: str
    members: tuple[str, str]
    start_ts: float
    end_ts: float
    messages: int  # offsets both members read

    @property
    def seconds(self) -> float:
        return self.end_ts - self.start_ts


def reading_spans(consumes: Iterable[dict[str, Any]]) -> dict[str, list[Span]]:
    """Partition ("t/p") -> every member's reading spans, in time order of their start."""
    open_spans: dict[tuple[str, str], Span] = {}
    spans: dict[str, list[Span]] = defaultdict(list)
    for r in sorted(consumes, key=lambda r: r["ts"]):
        partition = f"{r['topic']}/{r['partition']}"
        key = (partition, r["member"])
        span = open_spans.get(key)
        if span is None or r["ts"] - span.last_ts > SPAN_GAP_S:
            span = open_spans[key] = Span(r["member"], r["ts"], r["ts"])
            spans[partition].append(span)
        span.last_ts = r["ts"]
        span.offsets.update(range(r["first_offset"], r["last_offset"] + 1))
    return dict(spans)


def overlap_windows(consumes: Iterable[dict[str, Any]]) -> list[Overlap]:
    found = []
    for partition, spans in sorted(reading_spans(consumes).items()):
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if b.first_ts >= a.last_ts:
                    continue  # spans are sorted by start: b begins after a ended (later ones may not)
                if a.member == b.member:
                    continue
                start, end = max(a.first_ts, b.first_ts), min(a.last_ts, b.last_ts)
                if end > start:
                    found.append(Overlap(partition, (a.member, b.member), start, end, len(a.offsets & b.offsets)))
    return found
