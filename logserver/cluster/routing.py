"""Who may answer a request for a partition in cluster mode: its leader, at its epoch.

``ClusterRouting`` is the cluster's side of ``logserver.partition_routing``: the
single-node Produce, Fetch, ListOffsets and DeleteRecords handlers ask it, so ACLs,
transactions and validation apply in cluster mode exactly as on a single node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from logserver.topic_config import min_insync_replicas

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode

ACKS_ALL = -1
#: The answer to an acks=all batch appended here whose wait for the ISR ended because
#: this broker stopped leading (resigned, its session lost, shut down). Clients read
#: NOT_LEADER_OR_FOLLOWER as "not persisted" (librdkafka's MsgNotPersisted), yet the batch
#: may be on the new leader: a transactional librdkafka producer then purged it on abort
#: and reused its sequence, the new leader took the next batch for a duplicate of it and
#: acknowledged it at the old one's offset, and a committed transaction lost its records.
#: REQUEST_TIMED_OUT says "possibly persisted" (retried, the sequence kept), as for a
#: write the ISR did not confirm in time. NOT_LEADER_OR_FOLLOWER is for a batch refused
#: before any append (``leader_error``).
STOPPED_LEADING = ErrorCode.REQUEST_TIMED_OUT


class ClusterRouting:
    """Answers from the partition state the etcd watch keeps in ``node.model``."""

    replicated = True

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        node = self._node
        state = node.model.partition(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if state.leader != node.node_id or (topic, partition) not in node.leaders:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch < 0:
            return ErrorCode.NONE
        if current_leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > state.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self._node.model.partition(topic, partition)
        return -1 if state is None else state.leader_epoch

    def high_watermark_lagging(self, topic: str, partition: int) -> bool:
        leader = self._node.leaders.get((topic, partition))
        return leader is not None and leader.lagging

    def produce_error(self, topic: str, partition: int, acks: int) -> int:
        node = self._node
        state = node.model.partition(topic, partition)
        if acks == ACKS_ALL and state is not None and len(state.isr) < self._min_isr(topic):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def appended(self, topic: str, partition: int, end_offset: int,
                 acks: int) -> Awaitable[int] | None:
        node = self._node
        where = (topic, partition)
        node.advance(where)  # the ISR may be the leader alone
        if acks != ACKS_ALL:
            return None
        leader = node.leaders.get(where)
        if leader is None:  # resigned between the append and now
            return _resolved(STOPPED_LEADING)
        return self._replicated(where, leader.wait_for(end_offset))

    async def _replicated(self, where: tuple[str, int], waiting: asyncio.Future[int]) -> int:
        """Kafka's rule once the high watermark passed the batch: an ISR that shrank
        below min.insync.replicas meanwhile makes it NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        A wait ended by this broker no longer leading is STOPPED_LEADING."""
        try:
            error = await waiting
        finally:
            waiting.cancel()  # a timed-out produce leaves no waiter behind
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return STOPPED_LEADING
        if error != ErrorCode.NONE:
            return error
        node = self._node
        state = node.model.partition(*where)
        if state is not None and len(state.isr) < self._min_isr(where[0]):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _min_isr(self, topic: str) -> int:
        """The topic's min.insync.replicas (its cluster-wide override in etcd), else the
        broker's."""
        record = self._node.model.topics.get(topic)
        return min_insync_replicas(None if record is None else record.configs,
                                   self._node.min_isr)

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return self._node.model.topic_for_id(topic_id)

    def follower_fetched(self, replica_id: int, topic: str, partition: int,
                         fetch_offset: int) -> None:
        self._node.follower_fetched((topic, partition), replica_id, fetch_offset)

    def replica_throttled(self, replica_id: int, topic: str, partition: int) -> bool:
        return self._node.throttle.leader_throttled(topic, partition, replica_id)

    def replica_allowance(self) -> int:
        return self._node.throttle.leader_allowance()

    def replica_bytes_sent(self, size: int) -> None:
        self._node.throttle.leader_sent(size)

    def coordinates_transactions(self, transactional_id: str | None = None) -> bool:
        # The id's coordinator leads its __transaction_state partition (and has loaded it).
        return transactional_id is not None \
            and self._node.broker.transactions.serves(transactional_id)


async def _resolved(error: int) -> int:
    return error
