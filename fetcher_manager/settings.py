"""The consumer configuration the fetcher side reads (spec §2), already parsed and validated by the connector."""

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
    queued_max_message_chunks: int = 2
    consumer_timeout_ms: int = -1

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in ("smallest", "largest"):
            raise ValueError(f"auto_offset_reset must be 'smallest' or 'largest', not {self.auto_offset_reset!r}")
        if self.num_consumer_fetchers < 1:
            raise ValueError("num_consumer_fetchers must be at least 1")
        if self.queued_max_message_chunks < 1:
            raise ValueError("queued_max_message_chunks must be at least 1")
