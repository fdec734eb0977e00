"""Kafka's consumer protocol: what a "consumer" group member subscribes to and is assigned.

Group coordinators treat these bytes as opaque; consumers (and tools that show who reads
what) agree on Kafka's ConsumerProtocolSubscription/Assignment layout. We write version 0
and read any version: later versions only append fields, which a reader may ignore.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

Assignment = dict[str, list[int]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise ValueError("consumer protocol data cut short")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def string(self) -> str:
        size = self.take(_I16)
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("bad string in consumer protocol data")
        text = self.data[self.pos:self.pos + size].decode()
        self.pos += size
        return text


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def encode_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    return b"".join([_I16.pack(0), _I32.pack(len(topics)), *map(_string, topics), _I32.pack(-1)])


def decode_subscription(data: bytes) -> list[str]:
    reader = _Reader(data)
    reader.take(_I16)  # version
    return [reader.string() for _ in range(reader.take(_I32))]


def encode_assignment(assignment: Assignment) -> bytes:
    """ConsumerProtocolAssignment v0: partitions by topic, no user data."""
    parts = [_I16.pack(0), _I32.pack(len(assignment))]
    for topic, partitions in assignment.items():
        parts += [_string(topic), _I32.pack(len(partitions)), *(_I32.pack(p) for p in partitions)]
    parts.append(_I32.pack(-1))
    return b"".join(parts)


def decode_assignment(data: bytes) -> Assignment:
    """Partitions by topic; empty for no data (a member not assigned yet)."""
    if not data:
        return {}
    reader = _Reader(data)
    reader.take(_I16)  # version
    out: Assignment = {}
    for _ in range(reader.take(_I32)):
        topic = reader.string()
        out[topic] = [reader.take(_I32) for _ in range(reader.take(_I32))]
    return out


def range_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: per topic, consecutive partition ranges to the members
    subscribed to it, sorted by member id, the first ones getting one more."""
    out: dict[str, Assignment] = {member: {} for member in members}
    for topic, count in sorted(partitions.items()):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        each, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = each + (1 if i < extra else 0)
            if n:
                out[member][topic] = list(range(start, start + n))
            start += n
    return out
