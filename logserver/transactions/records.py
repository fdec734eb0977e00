"""The key/value schema of ``__transaction_state``.

Key (Kafka's TransactionLogKey v0): int16 version 0, string transactional id.
Value: Kafka's TransactionLogValue v0 (int64 producer id, int16 epoch, int32 timeout,
int8 status, nullable array of (string topic, int32 array partitions), int64 last update
time, int64 start time), followed by this server's extension: int16 last epoch and the
pending transactional offsets (int32 group count, then per group: string group, int32
count, then per offset: string topic, int32 partition, int64 offset, int32 leader epoch,
string metadata). The pending offsets were kept here by older versions of this server;
they are still read (and committed with the transaction), but new TxnOffsetCommit
offsets wait at the group coordinator, in ``__consumer_offsets`` as transactional
records, as Kafka keeps them (``logserver.groups.txn_offsets``), and the group count
written is that of the groups the transaction took in (each with no offsets). A null
value deletes the key.
"""

from __future__ import annotations

import struct

from logserver.transactions.metadata import PendingOffset, TopicPartition, TxnMetadata, TxnState

__all__ = ["decode_key", "decode_value", "encode_key", "encode_value"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">qhib")
_TIMES = struct.Struct(">qq")
_OFFSET = struct.Struct(">iqi")
KEY_VERSION = 0
VALUE_VERSION = 0


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def int16(self) -> int:
        return self.unpack(_I16)[0]

    def int32(self) -> int:
        return self.unpack(_I32)[0]

    def string(self) -> str:
        size = self.int16()
        text = self.data[self.pos:self.pos + size].decode()
        self.pos += size
        return text

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this server does not know."""
    reader = _Reader(data)
    if reader.int16() != KEY_VERSION:
        return None
    return reader.string()


def encode_value(meta: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [_I16.pack(VALUE_VERSION),
             _HEAD.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state),
             _I32.pack(len(by_topic))]
    for topic, partitions in by_topic.items():
        parts.append(_string(topic))
        parts.append(_I32.pack(len(partitions)))
        parts.extend(_I32.pack(p) for p in partitions)
    parts.append(_TIMES.pack(meta.last_update_ms, meta.start_ms))
    parts.append(_I16.pack(meta.last_epoch))
    parts.append(_I32.pack(len(meta.pending_offsets)))
    for group, offsets in meta.pending_offsets.items():
        parts.append(_string(group))
        parts.append(_I32.pack(len(offsets)))
        for (topic, partition), (offset, leader_epoch, metadata) in offsets.items():
            parts.append(_string(topic))
            parts.append(_OFFSET.pack(partition, offset, leader_epoch))
            parts.append(_string(metadata))
    return b"".join(parts)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """Raises ValueError for an unknown version, struct.error for torn bytes."""
    reader = _Reader(data)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise ValueError(f"unknown transaction log value version {version}")
    producer_id, epoch, timeout_ms, status = reader.unpack(_HEAD)
    partitions: set[TopicPartition] = set()
    count = reader.int32()
    for _ in range(max(count, 0)):  # -1: null array
        topic = reader.string()
        for _ in range(reader.int32()):
            partitions.add((topic, reader.int32()))
    last_update_ms, start_ms = reader.unpack(_TIMES)
    meta = TxnMetadata(transactional_id, producer_id, epoch, timeout_ms, TxnState(status),
                       partitions, last_update_ms, start_ms)
    if reader.at_end:  # written by Kafka's schema alone
        return meta
    meta.last_epoch = reader.int16()
    for _ in range(reader.int32()):
        group = reader.string()
        offsets: dict[TopicPartition, PendingOffset] = {}
        for _ in range(reader.int32()):
            topic = reader.string()
            partition, offset, leader_epoch = reader.unpack(_OFFSET)
            offsets[(topic, partition)] = (offset, leader_epoch, reader.string())
        meta.pending_offsets[group] = offsets
    return meta
