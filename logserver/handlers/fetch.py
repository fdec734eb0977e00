"""Fetch: file regions of whole batches; long-poll until min_bytes or max_wait_ms.

The response always names exactly the requested partitions (clients drop a response that
does not). Fetch sessions (KIP-227) are declined: session id 0 on every answer.

A partition named more than once is answered once, as Kafka does (its FetchRequest
collects the partitions in a map keyed by topic-partition: the first mention keeps its
place, the last one's offset and size win), so one request naming a partition 1,900
times costs one read. The response's total is capped by ``fetch.max.bytes`` (Kafka's
broker setting) as well as by the request's ``max_bytes``.

In cluster mode the same handler serves consumers and follower replicas (a replica id);
``broker.routing`` (logserver.partition_routing) refuses partitions this broker does not
lead at the given leader epoch, learns the followers' log end offsets, and tells which
follower reads are throttled (replication quotas).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, FileRegion, RequestHeader
from kafkaproto.messages import FetchRequest, FetchResponse
from logserver.fetch_wanted import Wanted, unique_partitions
from logserver.handlers.offset_for_leader_epoch import epoch_end_offset
from logserver.partition_routing import PartitionRouting
from logserver.security import checks
from logserver.security.acl import CLUSTER_NAME
from logserver.storage.api import Storage

if TYPE_CHECKING:
    from logserver.services import BrokerServices

PartitionData = FetchResponse.PartitionData
TOPIC_ID_VERSION = 13  # Fetch names topics by id from here on (KIP-516)
DIVERGING_EPOCH_VERSION = 12  # LastFetchedEpoch in, DivergingEpoch out (KIP-595)
AbortedTransaction = FetchResponse.AbortedTransaction
READ_COMMITTED = 1


def handle(broker: BrokerServices, header: RequestHeader, request: FetchRequest) -> (
        FetchResponse | Awaitable[FetchResponse]):
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    version = header.api_version
    routing = broker.routing
    follower = request.replica_id >= 0
    wanted = unique_partitions(request.topics, by_id=version >= TOPIC_ID_VERSION)
    names = {_topic_name(routing, topic, version) for topic, _ in wanted}
    if follower:  # reads to the log end, not limited by fetch.max.bytes or isolation
        max_bytes = request.max_bytes
        refused = _follower_fetched(broker, request, wanted, names, version)
    else:
        max_bytes = min(request.max_bytes, broker.config["fetch.max.bytes"]) if version >= 3 \
            else broker.config["fetch.max.bytes"]
        refused = {name for name in names
                   if name is not None and not checks.allowed(broker, checks.FETCH, name)}
    fetch = _Fetch(broker.storage, routing, wanted, max_bytes, version, refused,
                   committed=not follower and request.isolation_level == READ_COMMITTED,
                   follower=follower, replica_id=request.replica_id)
    response, size, partitions = fetch.build()
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not partitions:
        return response
    return _long_poll(fetch, request, partitions)


def _follower_fetched(broker: BrokerServices, request: FetchRequest, wanted: Wanted,
                      names: set[str | None], version: int) -> set[str]:
    """Kafka: a follower's Fetch needs CLUSTER_ACTION (else every topic is refused, the
    returned set), and its fetch offsets are its log end offsets, which the leader's
    high watermark and ISR follow."""
    routing = broker.routing
    if checks.denied(broker, checks.FETCH_FOLLOWER, CLUSTER_NAME):
        return {name for name in names if name is not None}
    for topic, partitions in wanted:
        name = _topic_name(routing, topic, version)
        if name is None:
            continue
        for partition in partitions:
            if not routing.leader_error(name, partition.partition, partition.current_leader_epoch):
                routing.follower_fetched(request.replica_id, name, partition.partition,
                                         partition.fetch_offset)
    return set()


async def _long_poll(fetch: _Fetch, request: FetchRequest,
                     partitions: list[tuple[str, int]]) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while True:
        await fetch.storage.wait_for_append(partitions, deadline - loop.time())
        response, size, partitions = fetch.build()
        if size >= request.min_bytes or loop.time() >= deadline or not partitions:
            return response
        _release_records(response)  # not enough yet: its slices must not pin segments


def _release_records(response: FetchResponse) -> None:
    """Release the record slices of a response that is dropped instead of sent."""
    for topic in response.responses:
        for partition in topic.partitions:
            if isinstance(partition.records, FileRegion):
                partition.records.release()


def _unknown_topic_id(topic: FetchRequest.FetchTopic,
                      partitions: list[FetchRequest.FetchPartition],
                      ) -> FetchResponse.FetchableTopicResponse:
    return FetchResponse.FetchableTopicResponse(topic="", topic_id=topic.topic_id, partitions=[
        _failed(wanted.partition, ErrorCode.UNKNOWN_TOPIC_ID) for wanted in partitions])


def _topic_name(routing: PartitionRouting, topic: FetchRequest.FetchTopic,
                version: int) -> str | None:
    """The topic's name: as sent before v13, looked up by id from v13 on (None: unknown id)."""
    return topic.topic if version < TOPIC_ID_VERSION else routing.topic_for_id(topic.topic_id)


@dataclass(frozen=True)
class _Fetch:
    """One Fetch request's fixed parts; ``build`` reads what is there now (again on
    each wake-up of a long poll)."""

    storage: Storage
    routing: PartitionRouting
    wanted: Wanted
    budget: int  # max bytes of the whole response
    version: int
    refused: set[str]  # topics without READ: TOPIC_AUTHORIZATION_FAILED, not read
    committed: bool  # read_committed: stop at the last stable offset (KIP-98)
    follower: bool  # a follower replica: reads to the log end
    replica_id: int = -1  # the follower's broker id (replication throttles)

    def build(self) -> tuple[FetchResponse, int, list[tuple[str, int]]]:
        """The response as of now, its record bytes, and the partitions worth waiting on."""
        storage, version = self.storage, self.version
        total = 0
        waitable: list[tuple[str, int]] = []
        topics = []
        for topic, partitions in self.wanted:
            name = _topic_name(self.routing, topic, version)
            if name is None:  # v13+: an id no topic has (deleted, or from another cluster)
                topics.append(_unknown_topic_id(topic, partitions))
                continue
            results = []
            for wanted in partitions:
                if name in self.refused:
                    results.append(_failed(wanted.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                error = self.routing.leader_error(name, wanted.partition, wanted.current_leader_epoch)
                if error:
                    results.append(_failed(wanted.partition, error))
                    continue
                # KIP-74: only the first batch of the first partition with data may exceed
                # the limits (so an oversized batch never stalls); every later partition
                # gets whole batches within what is left of max_bytes, or nothing.
                limit = max(0, min(wanted.partition_max_bytes, self.budget - total))
                # A throttled replica gets none of its records while the leader's quota
                # is used up (Kafka's ReplicationQuotaManager), else at most a second's
                # worth of the rate; what it gets counts against the quota.
                throttled = self.follower and self.routing.replica_throttled(
                    self.replica_id, name, wanted.partition)
                if throttled:
                    limit = min(limit, self.routing.replica_allowance())
                diverging = self._diverging(name, wanted)
                if diverging is not None:
                    results.append(diverging)
                    continue
                stable = (storage.last_stable_offset(name, wanted.partition,
                                                     fetch_offset=wanted.fetch_offset)
                          if self.committed else None)
                min_one = total == 0 and not (throttled and limit == 0)
                read = storage.read(name, wanted.partition, wanted.fetch_offset, limit,
                                    min_one=min_one, fetch_version=version, upper_bound=stable,
                                    replica=self.follower)
                if throttled:
                    self.routing.replica_bytes_sent(read.size)
                if read.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    results.append(_failed(wanted.partition, read.error))
                    continue
                if read.error == ErrorCode.NONE:
                    waitable.append((name, wanted.partition))
                total += read.size
                results.append(PartitionData(
                    partition_index=wanted.partition, error_code=read.error,
                    high_watermark=read.high_watermark,
                    last_stable_offset=read.high_watermark if stable is None else stable,
                    log_start_offset=read.log_start_offset,
                    aborted_transactions=_aborted(storage, name, wanted, stable, read.size),
                    preferred_read_replica=-1, records=read.records))
            topics.append(FetchResponse.FetchableTopicResponse(topic=name, topic_id=topic.topic_id,
                                                               partitions=results))
        response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
        return response, total, waitable

    def _diverging(self, name: str, wanted: FetchRequest.FetchPartition) -> PartitionData | None:
        """v12+ with a LastFetchedEpoch (KIP-595; kafka-python's consumer sends it): when
        that epoch ends below the fetch offset here, or is unknown here, the fetcher's log
        diverged from ours. Kafka answers with DivergingEpoch (where the epoch ends: the
        fetcher truncates or validates) and no records, or OFFSET_OUT_OF_RANGE when the
        end is unknown; None when the fetch goes on."""
        if self.version < DIVERGING_EPOCH_VERSION or wanted.last_fetched_epoch < 0:
            return None
        storage = self.storage
        start = storage.log_start_offset(name, wanted.partition)
        if start is None or wanted.fetch_offset < start:
            return None  # the read answers (OFFSET_OUT_OF_RANGE below the log start)
        epoch, end = epoch_end_offset(storage, name, wanted.partition,
                                      self.routing.leader_epoch(name, wanted.partition),
                                      wanted.last_fetched_epoch, self.follower)
        if end < 0 or epoch < 0:
            return _failed(wanted.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        if epoch >= wanted.last_fetched_epoch and end >= wanted.fetch_offset:
            return None
        high_watermark = storage.high_watermark(name, wanted.partition)
        return PartitionData(
            partition_index=wanted.partition, error_code=ErrorCode.NONE,
            high_watermark=-1 if high_watermark is None else high_watermark,
            last_stable_offset=-1, log_start_offset=start, aborted_transactions=[],
            preferred_read_replica=-1, records=b"",
            diverging_epoch=FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end))


def _failed(partition: int, error: int) -> FetchResponse.PartitionData:
    return PartitionData(partition_index=partition, error_code=error, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[],
                         records=b"")


def _aborted(storage: Storage, topic: str, wanted: FetchRequest.FetchPartition,
             stable: int | None, size: int) -> list[FetchResponse.AbortedTransaction]:
    """read_committed: the aborted transactions in the range read (KIP-98)."""
    if stable is None or size == 0:
        return []
    return [AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in
            storage.aborted_transactions(topic, wanted.partition, wanted.fetch_offset, stable)]
