"""Consumer groups in ``__consumer_offsets``, in Kafka's own record types.

Kafka's coordinator persists a consumer group as several compacted records, and so do
we, with the same key types and value schemas (values are declared once, as data, with
the codec's ``F(...)``; each value is an int16 version, 0, then a flexible body)::

    3  ConsumerGroupMetadataKey(group)                   -> Epoch (the group epoch),
                                                            MetadataHash (tagged, 4.1+)
    5  ConsumerGroupMemberMetadataKey(group, member)     -> instance, rack, client, host,
                                                            subscriptions, timeout, assignor
    6  ConsumerGroupTargetAssignmentMetadataKey(group)   -> AssignmentEpoch
    7  ConsumerGroupTargetAssignmentMemberKey(group, m)  -> the member's target partitions
    8  ConsumerGroupCurrentMemberAssignmentKey(group, m) -> member epoch, previous epoch,
                                                            state, assigned, pending revocation

Keys are Kafka's non-flexible layout (int16 type, int16-length strings). A removed
member gets tombstones for its keys 5, 7 and 8; a deleted group for 3 and 6 as well.
Partitions are written by topic id, as Kafka does.

``MetadataHash`` (Kafka 4.1's KIP-1101, where it replaced the subscription metadata
record of type 4) sums up the subscribed topics (id, name, partition count) the group's
epoch was set with, so that a coordinator that loads the group (a restart, or a new
coordinator after a failover) can tell whether they changed meanwhile instead of bumping
the epoch on the first heartbeat. Ours is a BLAKE2b digest, not Kafka's Murmur3 one: only
this broker compares it, and 0 (absent) never matches.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkaproto.codegen import Message, build_message
from kafkaproto.schema import F, Field, StructDecl
from kafkaproto.schema import struct as common_struct

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
CONSUMER_KEY_TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA,
                                TARGET_MEMBER, CURRENT_MEMBER})
VALUE_VERSION = 0

_I16 = struct.Struct(">h")


def _value(name: str, *fields: Field, common: tuple[StructDecl, ...] = ()) -> type[Message]:
    """A coordinator record value: version 0 only, flexible (as Kafka declares them)."""
    return build_message(name, fields, api_key=-1, api_name=name, is_request=False,
                         min_version=0, max_version=0, flexible_min=0, common=common,
                         module=__name__)


_TOPIC_PARTITIONS = common_struct(
    "TopicPartitions",
    F("TopicId", "uuid", "0+"),
    F("Partitions", "[]int32", "0+"),
)

GroupMetadataValue: Any = _value(
    "ConsumerGroupMetadataValue",
    F("Epoch", "int32", "0+"),
    # Kafka 4.1 (KIP-1101): the subscribed topics' metadata when the group epoch was set
    F("MetadataHash", "int64", "0+", default=0, tag=0, tagged="0+"),
)
MemberMetadataValue: Any = _value(
    "ConsumerGroupMemberMetadataValue",
    F("InstanceId", "string", "0+", nullable="0+", default=None),
    F("RackId", "string", "0+", nullable="0+", default=None),
    F("ClientId", "string", "0+"),
    F("ClientHost", "string", "0+"),
    F("SubscribedTopicNames", "[]string", "0+"),
    F("SubscribedTopicRegex", "string", "0+", nullable="0+", default=None),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1),
    F("ServerAssignor", "string", "0+", nullable="0+", default=None),
)
TargetMetadataValue: Any = _value("ConsumerGroupTargetAssignmentMetadataValue",
                             F("AssignmentEpoch", "int32", "0+"))
TargetMemberValue: Any = _value("ConsumerGroupTargetAssignmentMemberValue",
                           F("TopicPartitions", "[]TopicPartitions", "0+"),
                           common=(_TOPIC_PARTITIONS,))
CurrentMemberValue: Any = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    F("MemberEpoch", "int32", "0+"),
    F("PreviousMemberEpoch", "int32", "0+"),
    F("State", "int8", "0+"),
    F("AssignedPartitions", "[]TopicPartitions", "0+"),
    F("PartitionsPendingRevocation", "[]TopicPartitions", "0+"),
    common=(_TOPIC_PARTITIONS,),
)

VALUE_TYPES: dict[int, type[Message]] = {
    GROUP_METADATA: GroupMetadataValue,
    MEMBER_METADATA: MemberMetadataValue,
    TARGET_METADATA: TargetMetadataValue,
    TARGET_MEMBER: TargetMemberValue,
    CURRENT_MEMBER: CurrentMemberValue,
}


def metadata_hash(partition_counts: Mapping[str, int],
                  topic_id: Callable[[str], bytes | None]) -> int:
    """The ``MetadataHash`` of subscribed topics (name -> partition count); 0 for none."""
    if not partition_counts:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(partition_counts):
        data = name.encode()
        digest.update(_I16.pack(len(data)) + data + (topic_id(name) or bytes(16))
                      + struct.pack(">i", partition_counts[name]))
    return int.from_bytes(digest.digest(), "big", signed=True) or 1


class RecordFormatError(ValueError):
    """A consumer group key or value that does not follow the schema."""


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    parts = [_I16.pack(record_type), _string(group_id)]
    if member_id is not None:
        parts.append(_string(member_id))
    return b"".join(parts)


def encode_value(value: Message) -> bytes:
    return _I16.pack(VALUE_VERSION) + value.encode(0)


@dataclass(frozen=True, slots=True)
class ParsedKey:
    record_type: int
    group_id: str
    member_id: str | None


def parse_key(data: bytes) -> ParsedKey | None:
    """The key if it is one of a consumer group's, else None."""
    try:
        (record_type,) = _I16.unpack_from(data, 0)
        if record_type not in CONSUMER_KEY_TYPES:
            return None
        pos = 2
        strings = []
        while pos < len(data):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                raise RecordFormatError("bad string in key")
            strings.append(data[pos:pos + n].decode())
            pos += n
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"unreadable consumer group key: {exc}") from exc
    with_member = record_type in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER)
    if len(strings) != (2 if with_member else 1):
        raise RecordFormatError(f"key type {record_type} with {len(strings)} strings")
    return ParsedKey(record_type, strings[0], strings[1] if with_member else None)


def parse_value(record_type: int, data: bytes) -> Message:
    try:
        (version,) = _I16.unpack_from(data, 0)
    except struct.error as exc:
        raise RecordFormatError("empty value") from exc
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unsupported value version {version} of type {record_type}")
    try:
        return VALUE_TYPES[record_type].decode(memoryview(data)[2:], 0)
    except Exception as exc:
        raise RecordFormatError(f"unreadable value of type {record_type}: {exc}") from exc
