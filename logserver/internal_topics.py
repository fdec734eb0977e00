"""The names of the two internal topics, FindCoordinator's key types, and how a
coordinator key (group id, transactional id) maps to a partition, as Kafka places them.

Groups (``__consumer_offsets``), transactions (``__transaction_state``), the cluster that
creates and leads them, and the handlers that refuse client writes to them all need
these; they live below all of those so that none imports another for a constant.
"""

from __future__ import annotations

__all__ = ["GROUP_KEY_TYPE", "INTERNAL_TOPICS", "OFFSETS_TOPIC", "TRANSACTION_KEY_TYPE",
           "TXN_STATE_TOPIC", "java_string_hash", "kafka_partition_for"]

OFFSETS_TOPIC = "__consumer_offsets"
TXN_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_STATE_TOPIC})

# FindCoordinator's key types: the coordinator of a group or of a transactional id.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitions``, where ``Utils.abs`` maps
    Integer.MIN_VALUE to 0 (GroupCoordinator.partitionFor): a cluster places groups as
    Kafka does, so the same group ids spread the same way."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
