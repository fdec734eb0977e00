"""The transaction coordinator's markers in cluster mode: WriteTxnMarkers to each
partition's leader, as Kafka's TransactionMarkerChannelManager sends them.

The markers go over this broker's connections to its peers (cluster/peer_links.py). The
leader answers once the in-sync replicas have the marker (the single-node
WriteTxnMarkers handler asks ``broker.routing``); a leader that moved or is unreachable
is asked again, the new one once the etcd watch shows it, for a bounded time. What still
fails raises ``StoreError``: the transaction stays prepared and the coordinator's sweep
completes it later, as on a single node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.client import Backoff, Failures
from kafkaproto.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from logserver.cluster.peer_links import PeerUnreachable
from logserver.transactions.machine import Markers
from logserver.transactions.store import StoreError

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
RETRY_FOR_S = 15.0
#: Between rounds for the partitions whose markers are not written yet.
MARKER_BACKOFF = Backoff(100, 1000)
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
                       ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                       ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH,
                       # a __consumer_offsets partition whose groups are being loaded
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})


class MarkerSender:
    """``TransactionCoordinator.marker_sender`` in cluster mode."""

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    async def __call__(self, markers: Markers, partitions: list[tuple[str, int]],
                       coordinator_epoch: int) -> None:
        left = set(partitions)
        deadline = time.monotonic() + RETRY_FOR_S
        failures = Failures(MARKER_BACKOFF)
        while True:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for where in sorted(left):
                state = self._node.model.partition(*where)
                if state is None:
                    log.info("no marker for deleted partition %s-%d", *where)
                    left.discard(where)
                elif state.leader in self._node.model.brokers:
                    by_leader.setdefault(state.leader, []).append(where)
            outcomes = await asyncio.gather(*(
                self._send(leader, wanted, markers, coordinator_epoch)
                for leader, wanted in by_leader.items()))
            for done in outcomes:
                left -= done
            if not left:
                return
            if time.monotonic() > deadline:
                raise StoreError(f"markers for {sorted(left)} not written")
            await asyncio.sleep(failures.failed())

    async def _send(self, leader: int, partitions: list[tuple[str, int]], markers: Markers,
                    coordinator_epoch: int) -> set[tuple[str, int]]:
        """The partitions whose leader wrote (or has no such partition): done."""
        info = self._node.model.brokers[leader]
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
            transaction_result=markers.commit, coordinator_epoch=coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                    for name, indexes in topics.items()])])
        links = self._node.broker.peers.links(f"txn-coordinator-{self._node.node_id}")
        try:
            [body] = await links.ask((info.host, info.port), [(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, request)], None)
        except PeerUnreachable as exc:
            log.warning("markers to node %d (%s:%d): %s", leader, info.host, info.port, exc)
            return set()
        if not isinstance(body, WriteTxnMarkersResponse):
            raise StoreError(f"undecodable WriteTxnMarkers response from node {leader}")
        done: set[tuple[str, int]] = set()
        for result in body.markers:
            for answered in result.topics:
                for partition in answered.partitions:
                    where = (answered.name, partition.partition_index)
                    error = partition.error_code
                    if error in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        done.add(where)
                    elif error not in RETRIABLE:
                        raise StoreError(f"marker for {where[0]}-{where[1]}: {ErrorCode(error).name}")
        return done
