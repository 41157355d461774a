"""The part of the consumer configuration the fetcher side reads, already parsed and validated by the connector.

Settings the fetchers never read stay with the connector (``consumer.timeout.ms`` goes straight to each
``KafkaStream``), so this class does not suggest that changing them here changes fetching.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FetchSettings:
    client_id: str
    consumer_id: str  # for thread names and log lines
    fetch_message_max_bytes: int = 1048576
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 100
    num_consumer_fetchers: int = 1
    refresh_leader_backoff_ms: int = 200
    socket_timeout_ms: int = 30000
    socket_receive_buffer_bytes: int = 65536
    auto_offset_reset: str = "largest"  # "smallest" | "largest"

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in ("smallest", "largest"):
            raise ValueError(f"auto_offset_reset must be 'smallest' or 'largest', not {self.auto_offset_reset!r}")
        if self.num_consumer_fetchers < 1:
            raise ValueError("num_consumer_fetchers must be at least 1")
