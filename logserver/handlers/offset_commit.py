"""OffsetCommit (v2-9): validate like Kafka, persist, answer once the append is durable.

v9 (KIP-848) is v8 on the wire; in a consumer-protocol group the generation field is the
member epoch (STALE_MEMBER_EPOCH if it is not the member's current one), and members of
such groups must use v9+ (UNSUPPORTED_VERSION below it, as Kafka).

Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION without reaching the
coordinator. v2-4 may ask for a retention time of their own (an expiry timestamp is
stored with the offset, Kafka's value v1); v6+ carry the committed leader epoch.
A null metadata string is stored as "" (Kafka does the same).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import OffsetCommitRequest, OffsetCommitResponse
from logserver.groups.group import CommittedOffset
from logserver.groups.respond import respond
from logserver.handlers.commit_partitions import TopicPartition, sort_partitions
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = OffsetCommitResponse.OffsetCommitResponsePartition
_INT64_MAX = 2**63 - 1


def handle(broker: BrokerServices, header: RequestHeader, request: OffsetCommitRequest) -> (
        OffsetCommitResponse | Awaitable[OffsetCommitResponse]):
    version = header.api_version
    now = int(time.time() * 1000)
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    # A retention near 2**63 would overflow the stored int64 expiry: it means "never".
    expire = min(now + retention, _INT64_MAX) if retention >= 0 else -1
    # As Kafka: READ on the group (else every partition fails), then READ on each topic.
    group_refused = checks.denied(broker, checks.OFFSET_COMMIT_GROUP, request.group_id)
    errors, offsets = sort_partitions(
        broker, request.topics, group_refused, checks.OFFSET_COMMIT_TOPIC,
        lambda p: CommittedOffset(p.committed_offset,
                                  p.committed_leader_epoch if version >= 6 else -1,
                                  p.committed_metadata or "", now, expire))

    def build(committed: dict[TopicPartition, int]) -> OffsetCommitResponse:
        results = {**errors, **committed}
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(name=t.name, partitions=[
                Partition(partition_index=p.partition_index,
                          error_code=results.get((t.name, p.partition_index), ErrorCode.NONE))
                for p in t.partitions])
            for t in request.topics])

    if not offsets:
        return build({})
    future = broker.groups.commit_offsets(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 7 else None,
        generation_id=request.generation_id_or_member_epoch,
        offsets=offsets,
        api_version=version,
    )
    return respond(future, build)
