"""Fetch: file regions of whole batches; long-poll until min_bytes or max_wait_ms.

The response always names exactly the requested partitions (clients drop a response that
does not). Fetch sessions (KIP-227) are declined: session id 0 on every answer.

A partition named more than once is answered once, as Kafka does (its FetchRequest
collects the partitions in a map keyed by topic-partition: the first mention keeps its
place, the last one's offset and size win), so one request naming a partition 1,900
times costs one read. The response's total is capped by ``fetch.max.bytes`` (Kafka's
broker setting) as well as by the request's ``max_bytes``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, FileRegion, RequestHeader
from kafkaproto.messages import FetchRequest, FetchResponse
from logserver.fetch_wanted import Wanted, unique_partitions
from logserver.storage.api import Storage

if TYPE_CHECKING:
    from logserver.broker import Broker

PartitionData = FetchResponse.PartitionData


def handle(broker: Broker, header: RequestHeader, request: FetchRequest) -> (
        FetchResponse | Awaitable[FetchResponse]):
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    storage = broker.storage
    version = header.api_version
    max_bytes = min(request.max_bytes, broker.config["fetch.max.bytes"]) if version >= 3 \
        else broker.config["fetch.max.bytes"]
    wanted = unique_partitions(request.topics)
    response, size, partitions = _build(storage, wanted, max_bytes, version)
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not partitions:
        return response
    return _long_poll(storage, request, wanted, max_bytes, version, partitions)


async def _long_poll(storage: Storage, request: FetchRequest, wanted: Wanted, max_bytes: int,
                     version: int, partitions: list[tuple[str, int]]) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while True:
        await storage.wait_for_append(partitions, deadline - loop.time())
        response, size, partitions = _build(storage, wanted, max_bytes, version)
        if size >= request.min_bytes or loop.time() >= deadline or not partitions:
            return response
        _release_records(response)  # not enough yet: its slices must not pin segments


def _release_records(response: FetchResponse) -> None:
    """Release the record slices of a response that is dropped instead of sent."""
    for topic in response.responses:
        for partition in topic.partitions:
            if isinstance(partition.records, FileRegion):
                partition.records.release()


def _build(storage: Storage, wanted_topics: Wanted, budget: int, version: int) -> (
        tuple[FetchResponse, int, list[tuple[str, int]]]):
    """The response as of now, its record bytes, and the partitions worth waiting on."""
    total = 0
    waitable: list[tuple[str, int]] = []
    topics = []
    for topic_name, partitions in wanted_topics:
        results = []
        for wanted in partitions:
            # KIP-74: a partition's first batch comes whole even above the limits, while
            # the response's total budget lasts, so an oversized batch never stalls.
            limit = max(0, min(wanted.partition_max_bytes, budget - total))
            read = storage.read(topic_name, wanted.partition, wanted.fetch_offset, limit,
                                min_one=total < budget, fetch_version=version)
            if read.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                results.append(PartitionData(
                    partition_index=wanted.partition, error_code=read.error,
                    high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                    aborted_transactions=[], records=b""))
                continue
            if read.error == ErrorCode.NONE:
                waitable.append((topic_name, wanted.partition))
            total += read.size
            results.append(PartitionData(
                partition_index=wanted.partition, error_code=read.error,
                high_watermark=read.high_watermark, last_stable_offset=read.high_watermark,
                log_start_offset=read.log_start_offset, aborted_transactions=[],
                preferred_read_replica=-1, records=read.records))
        topics.append(FetchResponse.FetchableTopicResponse(topic=topic_name, partitions=results))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return response, total, waitable
