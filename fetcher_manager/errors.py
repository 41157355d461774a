"""Exceptions raised to the application by streams and iterators (Kafka 0.8 names, Python spelling)."""

from __future__ import annotations


class ConsumerTimeoutError(Exception):
    """No message arrived within ``consumer.timeout.ms``; the iterator stays usable (``ConsumerTimeoutException``)."""


class MessageSizeTooLargeError(Exception):
    """A fetched chunk held bytes but not one complete message: raise ``fetch.message.max.bytes``."""


class InvalidMessageError(Exception):
    """A record batch failed its CRC check or could not be parsed."""


class IteratorFailedError(Exception):
    """The iterator failed earlier (size or CRC error) and cannot be used again (Kafka's IllegalStateException)."""


class MessageDecodeError(Exception):
    """A key or value decoder raised; the message counts as consumed and iteration can go on."""
