"""OffsetFetch (v1-9): committed offsets, metadata and leader epochs exactly as stored.

v9 (KIP-848) lets a member of a consumer-protocol group send its member id and epoch:
UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH when they are not the group's current ones.

Null topics (v2+) mean every offset the group committed. v8 asks for several groups at
once. Group-level errors go to the top-level error (v2-7), to each group (v8), or to
every requested partition (v1, which has no top-level error), as Kafka does.

With ACLs, as Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; a requested
topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED per partition, and
"every offset" leaves such topics out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import OffsetFetchRequest, OffsetFetchResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Row = tuple[str, int, int, int, str, int]  # topic, partition, offset, epoch, metadata, error
Group = OffsetFetchResponse.OffsetFetchResponseGroup
GroupTopic = OffsetFetchResponse.OffsetFetchResponseTopics
GroupPartition = OffsetFetchResponse.OffsetFetchResponsePartitions
Topic = OffsetFetchResponse.OffsetFetchResponseTopic
Partition = OffsetFetchResponse.OffsetFetchResponsePartition


def handle(broker: BrokerServices, header: RequestHeader, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = header.api_version
    if version >= 8:
        groups = []
        for group in request.groups:
            partitions = (None if group.topics is None else
                          [(t.name, p) for t in group.topics for p in t.partition_indexes])
            member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, rows = _fetch(broker, group.group_id, partitions, request.require_stable,
                                 *member)
            rows = _unstable(broker, group.group_id, rows, request.require_stable)
            groups.append(Group(group_id=group.group_id, error_code=error, topics=[
                GroupTopic(name=name, partitions=[
                    GroupPartition(partition_index=p, committed_offset=o,
                                   committed_leader_epoch=e, metadata=m, error_code=err)
                    for _, p, o, e, m, err in topic_rows])
                for name, topic_rows in _by_topic(rows)]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    partitions = (None if request.topics is None else
                  [(t.name, p) for t in request.topics for p in t.partition_indexes])
    require_stable = request.require_stable if version >= 7 else False
    error, rows = _fetch(broker, request.group_id, partitions, require_stable)
    rows = _unstable(broker, request.group_id, rows, require_stable)
    if error != ErrorCode.NONE and version < 2:
        rows = [(t, p, -1, -1, "", error) for t, p in partitions or []]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        Topic(name=name, partitions=[
            Partition(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                      metadata=m, error_code=err)
            for _, p, o, e, m, err in topic_rows])
        for name, topic_rows in _by_topic(rows)])


def _fetch(broker: BrokerServices, group_id: str, partitions: list[tuple[str, int]] | None,
           require_stable: bool, member_id: str | None = None,
           member_epoch: int = -1) -> tuple[int, list[Row]]:
    """The coordinator's answer, within what the principal may see."""
    if not checks.allowed(broker, checks.OFFSET_FETCH_GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    visible: dict[str, bool] = {}

    def may_see(topic: str) -> bool:
        if topic not in visible:
            visible[topic] = checks.allowed(broker, checks.OFFSET_FETCH_TOPIC, topic)
        return visible[topic]

    if partitions is None:
        error, rows = broker.groups.fetch_offsets(group_id, None, require_stable,
                                                  member_id, member_epoch)
        return error, [row for row in rows if may_see(row[0])]
    allowed = [(t, p) for t, p in partitions if may_see(t)]
    error, rows = broker.groups.fetch_offsets(group_id, allowed, require_stable,
                                              member_id, member_epoch)
    refused: list[Row] = [(t, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                          for t, p in partitions if not may_see(t)]
    return error, rows + refused if error == ErrorCode.NONE else rows


def _by_topic(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """Rows grouped by topic, topics in order of first appearance."""
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    return list(grouped.items())


def _unstable(broker: BrokerServices, group_id: str, rows: list[Row], require_stable: bool) -> list[Row]:
    """KIP-447: with require_stable, a partition whose offset an open transaction is
    about to commit answers UNSTABLE_OFFSET_COMMIT (retriable) instead of the old offset."""
    if not require_stable:
        return rows
    pending = broker.transactions.pending_offset_partitions(group_id)
    if not pending:
        return rows
    return [(t, p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT) if (t, p) in pending
            else (t, p, o, e, m, err) for t, p, o, e, m, err in rows]
