"""Fetch: file regions of whole batches; long-poll until min_bytes or max_wait_ms.

The response always names exactly the requested partitions (clients drop a response that
does not). Fetch sessions (KIP-227) are declined: session id 0 on every answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, FileRegion, RequestHeader
from kafkaproto.messages import FetchRequest, FetchResponse
from logserver.storage.api import Storage

if TYPE_CHECKING:
    from logserver.broker import Broker

PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
READ_COMMITTED = 1


def handle(broker: Broker, header: RequestHeader, request: FetchRequest) -> (
        FetchResponse | Awaitable[FetchResponse]):
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    storage = broker.storage
    response, size, partitions = _build(storage, request, header.api_version)
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not partitions:
        return response
    return _long_poll(storage, request, header.api_version, partitions)


async def _long_poll(storage: Storage, request: FetchRequest, version: int,
                     partitions: list[tuple[str, int]]) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while True:
        await storage.wait_for_append(partitions, deadline - loop.time())
        response, size, partitions = _build(storage, request, version)
        if size >= request.min_bytes or loop.time() >= deadline or not partitions:
            return response
        _release_records(response)  # not enough yet: its slices must not pin segments


def _release_records(response: FetchResponse) -> None:
    """Release the record slices of a response that is dropped instead of sent."""
    for topic in response.responses:
        for partition in topic.partitions:
            if isinstance(partition.records, FileRegion):
                partition.records.release()


def _build(storage: Storage, request: FetchRequest, version: int) -> (
        tuple[FetchResponse, int, list[tuple[str, int]]]):
    """The response as of now, its record bytes, and the partitions worth waiting on."""
    budget = request.max_bytes if version >= 3 else 2**31 - 1
    total = 0
    waitable: list[tuple[str, int]] = []
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            # KIP-74: a partition's first batch comes whole even above the limits, while
            # the response's total budget lasts, so an oversized batch never stalls.
            limit = max(0, min(wanted.partition_max_bytes, budget - total))
            stable = (storage.last_stable_offset(topic.topic, wanted.partition,
                                                 fetch_offset=wanted.fetch_offset)
                      if request.isolation_level == READ_COMMITTED else None)
            read = storage.read(topic.topic, wanted.partition, wanted.fetch_offset, limit,
                                min_one=total < budget, fetch_version=version, upper_bound=stable)
            if read.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                results.append(PartitionData(
                    partition_index=wanted.partition, error_code=read.error,
                    high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                    aborted_transactions=[], records=b""))
                continue
            if read.error == ErrorCode.NONE:
                waitable.append((topic.topic, wanted.partition))
            total += read.size
            results.append(PartitionData(
                partition_index=wanted.partition, error_code=read.error,
                high_watermark=read.high_watermark,
                last_stable_offset=read.high_watermark if stable is None else stable,
                log_start_offset=read.log_start_offset,
                aborted_transactions=_aborted(storage, topic.topic, wanted, stable, read.size),
                preferred_read_replica=-1, records=read.records))
        topics.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=results))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return response, total, waitable


def _aborted(storage: Storage, topic: str, wanted: FetchRequest.FetchPartition,
             stable: int | None, size: int) -> list[FetchResponse.AbortedTransaction]:
    """read_committed: the aborted transactions in the range read (KIP-98)."""
    if stable is None or size == 0:
        return []
    return [AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in
            storage.aborted_transactions(topic, wanted.partition, wanted.fetch_offset, stable)]
