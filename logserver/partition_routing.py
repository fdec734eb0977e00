"""The one question the data-path handlers ask about replication: may this broker
answer for a partition, and what must an acknowledgement wait for.

Produce, Fetch, ListOffsets and DeleteRecords are the same handlers on a single node and
in a cluster (ACLs, transactions, validation, KIP-74 apply alike); only this narrow
object differs. On a single node (``LocalRouting``) this broker leads every partition at
leader epoch 0, acks=all is acks=1 (but a topic's ``min.insync.replicas`` above 1 makes
it NOT_ENOUGH_REPLICAS, as on a one-broker Kafka), and no follower fetches. In cluster mode
``logserver.cluster.routing.ClusterRouting`` answers from the partition state in etcd:
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, NOT_ENOUGH_REPLICAS,
and waits of acks=all for the in-sync replicas. The high watermark consumers stop at is
the storage engine's (the cluster sets it; on a single node it is the log end).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from kafkaproto import ErrorCode
from logserver.partition import LEADER_EPOCH
from logserver.storage.api import Storage
from logserver.topic_config import min_insync_replicas

__all__ = ["LocalRouting", "PartitionRouting"]

ACKS_ALL = -1


class PartitionRouting(Protocol):
    #: False on a single node: no acknowledgement waits for other replicas, and the
    #: Produce handler skips the work ``appended`` would need.
    replicated: bool

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """NONE when this broker leads the partition and ``current_leader_epoch`` (-1:
        not checked) is its leader epoch; else the error a client acts on."""
        ...

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch, as ListOffsets reports it."""
        ...

    def high_watermark_lagging(self, topic: str, partition: int) -> bool:
        """Is this leader's high watermark still below the offset its leader epoch began
        at (KIP-207)? Records the previous leader acknowledged may lie above it, so
        ListOffsets answers OFFSET_NOT_AVAILABLE rather than an end that misses them."""
        ...

    def produce_error(self, topic: str, partition: int, acks: int) -> int:
        """Checked before an append, after ``leader_error``: NOT_ENOUGH_REPLICAS when
        acks=all and the ISR is smaller than min.insync.replicas."""
        ...

    def appended(self, topic: str, partition: int, end_offset: int,
                 acks: int) -> Awaitable[int] | None:
        """An append up to ``end_offset`` (exclusive) succeeded on the leader: what an
        acks=all acknowledgement waits for (resolves to an error code: NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER), else None."""
        ...

    def topic_for_id(self, topic_id: bytes) -> str | None:
        """The topic a Fetch v13+ names by id (the cluster's ids in cluster mode)."""
        ...

    def follower_fetched(self, replica_id: int, topic: str, partition: int,
                         fetch_offset: int) -> None:
        """A follower replica fetches from ``fetch_offset``: its log end offset."""
        ...

    def replica_throttled(self, replica_id: int, topic: str, partition: int) -> bool:
        """Is what this leader sends follower ``replica_id`` of the partition throttled
        (a listed replica out of the ISR)?"""
        ...

    def replica_allowance(self) -> int:
        """The most bytes of a throttled partition one Fetch may carry now (0: the
        leader's replication quota is used up)."""
        ...

    def replica_bytes_sent(self, size: int) -> None:
        """Throttled bytes sent to a follower: they count against the quota."""
        ...

    def coordinates_transactions(self, transactional_id: str | None = None) -> bool:
        """Is ``transactional_id``'s transaction coordinator on this broker? Only there can a transactional
        Produce be checked against the open transaction; elsewhere the partition leader
        relies on the producer epoch, as Kafka's leaders did before KIP-890."""
        ...


class LocalRouting:
    """Single-node mode: this broker is the only replica of every partition."""

    replicated = False

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        return ErrorCode.NONE

    def leader_epoch(self, topic: str, partition: int) -> int:
        return LEADER_EPOCH

    def high_watermark_lagging(self, topic: str, partition: int) -> bool:
        return False

    def produce_error(self, topic: str, partition: int, acks: int) -> int:
        # One replica: a topic's min.insync.replicas above 1 cannot be met (as on a
        # one-broker Kafka); the broker-wide setting is for cluster mode only.
        if acks == ACKS_ALL \
                and min_insync_replicas(self._storage.topic_overrides(topic), 1) > 1:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def appended(self, topic: str, partition: int, end_offset: int,
                 acks: int) -> Awaitable[int] | None:
        return None

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return self._storage.topic_for_id(topic_id)

    def follower_fetched(self, replica_id: int, topic: str, partition: int,
                         fetch_offset: int) -> None:
        return None

    def replica_throttled(self, replica_id: int, topic: str, partition: int) -> bool:
        return False

    def replica_allowance(self) -> int:
        return 2**31 - 1

    def replica_bytes_sent(self, size: int) -> None:
        return None

    def coordinates_transactions(self, transactional_id: str | None = None) -> bool:
        return True
