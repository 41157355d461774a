"""A live broker as the consumer sees it: id and the PLAINTEXT endpoint it fetches from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Broker:
    id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"id:{self.id},host:{self.host},port:{self.port}"
