"""A handler's answer that is no response but a closed connection.

Kafka closes the connection when a Produce with acks=0 fails on any partition
(KafkaApis.handleProduceRequest): the client gets no response to read the error from,
so the close is the only way to tell it something went wrong (it then refreshes its
metadata). The network layer closes the connection when a handler returns this.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CloseConnection"]


@dataclass(frozen=True)
class CloseConnection:
    """Close this client's connection instead of answering; ``reason`` is logged."""

    reason: str
