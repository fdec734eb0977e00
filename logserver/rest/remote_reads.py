"""Cluster mode: the REST Proxy's reads of partitions another broker leads, as a Kafka
consumer makes them: a Fetch to the leader (the consumer instance's isolation level),
its records decoded as the local reads are (logserver.rest.reading), read_committed
dropping the aborted transactions the response names."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import FetchRequest, FetchResponse
from kafkaproto.records import Record
from logserver.rest import to_node
from logserver.rest.reading import records_of

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topics by name, aborted transactions, last stable offset
TopicPartition = tuple[str, int]


def by_leader(broker: WithCluster, partitions: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """The partitions another live broker leads, by that broker."""
    found: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        node = to_node.remote_leader(broker, *tp)
        if node is not None:
            found.setdefault(node, []).append(tp)
    return found


async def fetch(broker: WithCluster, node: int, positions: dict[TopicPartition, int],
                max_bytes: int, wait_ms: int, committed: bool,
                errors: dict[TopicPartition, int] | None = None) -> dict[TopicPartition, list[Record]]:
    """Records of the partitions ``node`` leads from their positions (waiting up to
    ``wait_ms`` for some); the partitions' errors go to ``errors``."""
    by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
    for (topic, partition), offset in positions.items():
        by_topic.setdefault(topic, []).append(FetchRequest.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max(max_bytes, 1)))
    request = FetchRequest(
        replica_id=-1, max_wait_ms=max(wait_ms, 0), min_bytes=1, max_bytes=max(max_bytes, 1),
        isolation_level=int(committed), session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[], rack_id="")
    try:
        response = await to_node.send(broker, node, ApiKey.FETCH, FETCH_VERSION, request,
                                      wait_ms / 1000 + 30)
    except to_node.NodeUnreachable:
        if errors is not None:
            errors.update(dict.fromkeys(positions, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        return {}
    if not isinstance(response, FetchResponse):
        return {}
    limit = broker.config["fetch.max.bytes"]
    found: dict[TopicPartition, list[Record]] = {}
    for answered in response.responses:
        for part in answered.partitions:
            tp = (answered.topic, part.partition_index)
            if tp not in positions:
                continue
            if part.error_code:
                log.debug("REST read of %s-%d from node %d: error %d", *tp, node, part.error_code)
                if errors is not None:
                    errors[tp] = part.error_code
                continue
            end = part.high_watermark
            if committed and part.last_stable_offset >= 0:
                end = min(end, part.last_stable_offset)
            aborted = [(a.producer_id, a.first_offset)
                       for a in part.aborted_transactions or ()] if committed else []
            data = part.records if isinstance(part.records, bytes | bytearray | memoryview) else b""
            got = records_of(data, positions[tp], end, aborted, limit)
            if got:
                found[tp] = got
    return found


async def fetch_all(broker: WithCluster, remote: dict[int, list[TopicPartition]],
                    positions: dict[TopicPartition, int], max_bytes: int, wait_ms: int,
                    committed: bool, errors: dict[TopicPartition, int] | None = None,
                    ) -> dict[TopicPartition, list[Record]]:
    """One Fetch to each leader at once; their records together."""
    found: dict[TopicPartition, list[Record]] = {}
    for got in await asyncio.gather(*(
            fetch(broker, node, {tp: positions[tp] for tp in tps}, max_bytes, wait_ms,
                  committed, errors) for node, tps in remote.items())):
        found.update(got)
    return found
