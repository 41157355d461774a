"""What a member subscribes to (Kafka 0.8.2 `TopicCount` and `TopicFilter`), independent of ZooKeeper.

A registration is either static (topic -> stream count) or a wildcard (one regex -> stream count). Wildcards
are evaluated by *each reader* against its own view of `/brokers/topics`, with Java `String.matches`
(full-match) semantics, which is `re.fullmatch` here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

STATIC = "static"
WHITE_LIST = "white_list"
BLACK_LIST = "black_list"
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})


def normalise_regex(raw: str) -> str:
    """TopicFilter's clean-up: trim, ',' -> '|', drop spaces, strip quote runs that .properties files bring."""
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    return re.sub(r"[\"']+$", "", regex)


@dataclass(frozen=True)
class TopicFilter:
    """Base of Whitelist/Blacklist; `regex` is stored normalised, as Kafka does."""

    raw_regex: str
    regex: str = field(init=False)
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    pattern_name = ""

    def __post_init__(self) -> None:
        regex = normalise_regex(self.raw_regex)
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise ValueError(f"{regex!r} is an invalid topic regex ({exc}): fix the whitelist/blacklist") from None
        object.__setattr__(self, "regex", regex)
        object.__setattr__(self, "_compiled", compiled)

    def matches(self, topic: str) -> bool:
        return self._compiled.fullmatch(topic) is not None

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        raise NotImplementedError


class Whitelist(TopicFilter):
    pattern_name = WHITE_LIST

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return self.matches(topic) and not (exclude_internal_topics and topic in INTERNAL_TOPICS)


class Blacklist(TopicFilter):
    pattern_name = BLACK_LIST

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return not self.matches(topic) and not (exclude_internal_topics and topic in INTERNAL_TOPICS)


@dataclass(frozen=True)
class Registration:
    """The content of `/consumers/<g>/ids/<id>`, decoded. `subscription` holds the regex for wildcards."""

    pattern: str
    subscription: Mapping[str, int]
    timestamp: str | None = None
    version: int = 1
    # Opt-in modes that need every member (docs/modes.md), written as an extra key that 0.8.2 ignores; empty for a
    # faithful member, whose registration stays byte for byte 0.8.2's.
    modes: tuple[str, ...] = ()

    @classmethod
    def static(cls, topic_streams: Mapping[str, int], timestamp: str | None = None) -> Registration:
        return cls(STATIC, dict(topic_streams), timestamp)

    @classmethod
    def wildcard(cls, topic_filter: TopicFilter, num_streams: int, timestamp: str | None = None) -> Registration:
        return cls(topic_filter.pattern_name, {topic_filter.regex: num_streams}, timestamp)

    @property
    def is_wildcard(self) -> bool:
        # Kafka: an empty map or an unknown pattern means static.
        return bool(self.subscription) and self.pattern in (WHITE_LIST, BLACK_LIST)

    def topic_filter(self) -> TopicFilter | None:
        if not self.is_wildcard:
            return None
        regex = next(iter(self.subscription))
        return Whitelist(regex) if self.pattern == WHITE_LIST else Blacklist(regex)

    def topic_streams(self, all_topics: Iterable[str], exclude_internal_topics: bool = True) -> dict[str, int]:
        """topic -> stream count, with a wildcard evaluated against `all_topics` (this reader's view)."""
        topic_filter = self.topic_filter()
        if topic_filter is None:
            return dict(self.subscription)
        streams = next(iter(self.subscription.values()))
        return {t: streams for t in sorted(all_topics) if topic_filter.is_topic_allowed(t, exclude_internal_topics)}
