"""Keys and values of the records in ``__consumer_offsets``, in Kafka's own schema.

Using Kafka's layout (not a private one) means tools that know it, such as
``kafka-console-consumer --formatter OffsetsMessageFormatter``, can read our internal
topic, and that a key is the compaction identity Kafka uses: one live value per
(group, topic, partition) and per group.

Keys (int16 version first)::

    0, 1  OffsetCommitKey    group string, topic string, partition int32
    2     GroupMetadataKey   group string

Values (int16 version first; null value = tombstone)::

    OffsetCommitValue    v0 offset, metadata, commit_ts | v1 + expire_ts | v2 = v0
                         v3 offset, leader_epoch, metadata, commit_ts (written by us)
    GroupMetadataValue   v0 protocol_type, generation, protocol?, leader?, members
                         v1 + member rebalance_timeout | v2 + current_state_timestamp
                         v3 + member group_instance_id (written by us)

Strings are int16-length UTF-8 (-1 = null), bytes int32-length. Flexible versions
(v4+, written by Kafka 3.x/4.x coordinators) are not read: we only replay our own log,
and a record we cannot read is skipped with a warning rather than stopping start-up.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` that does not follow the schema."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: none committed
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only from OffsetCommit v2-4 with a retention time


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


# -- encoding -----------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode()
    if len(data) > 32767:
        raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length")
    return _I16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return (_I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group) + _string(topic)
            + _I32.pack(partition))


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group)


def offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp >= 0:  # Kafka writes v1 exactly when an expiry was asked for
        return (_I16.pack(OFFSET_COMMIT_VALUE_WITH_EXPIRY) + _I64.pack(value.offset)
                + _string(value.metadata) + _I64.pack(value.commit_timestamp)
                + _I64.pack(value.expire_timestamp))
    return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch) + _string(value.metadata)
            + _I64.pack(value.commit_timestamp))


def group_value(value: GroupValue) -> bytes:
    parts = [_I16.pack(GROUP_METADATA_VALUE_VERSION), _string(value.protocol_type),
             _I32.pack(value.generation), _string(value.protocol), _string(value.leader),
             _I64.pack(value.current_state_timestamp), _I32.pack(len(value.members))]
    for m in value.members:
        parts += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id),
                  _string(m.client_host), _I32.pack(m.rebalance_timeout),
                  _I32.pack(m.session_timeout), _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(parts)


# -- decoding -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("truncated")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return value

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.data):
            raise RecordFormatError("truncated string")
        try:
            text = self.data[self.pos:end].decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from exc
        self.pos = end
        return text

    def required_string(self) -> str:
        text = self.string()
        if text is None:
            raise RecordFormatError("null where a string is required")
        return text

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        end = self.pos + n
        if end > len(self.data):
            raise RecordFormatError("truncated bytes")
        data = self.data[self.pos:end]
        self.pos = end
        return bytes(data)


def parse_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key's identity, or None for record types a classic coordinator does not use."""
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.required_string(), reader.required_string(), reader.i32())
    if version == 2:
        return GroupKey(reader.required_string())
    return None


def parse_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")
    offset = reader.i64()
    epoch = reader.i32() if version >= 3 else -1
    metadata = reader.required_string()
    commit_ts = reader.i64()
    expire_ts = reader.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit_ts, expire_ts)


def parse_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = reader.required_string()
    generation = reader.i32()
    protocol = reader.string()
    leader = reader.string()
    state_ts = reader.i64() if version >= 2 else -1
    count = reader.i32()
    if count < 0 or count > len(data):
        raise RecordFormatError(f"bad member count {count}")
    members = []
    for _ in range(count):
        member_id = reader.required_string()
        instance_id = reader.string() if version >= 3 else None
        client_id = reader.required_string()
        client_host = reader.required_string()
        rebalance_timeout = reader.i32() if version >= 1 else -1
        session_timeout = reader.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout, session_timeout, reader.bytes_(),
                                   reader.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)
