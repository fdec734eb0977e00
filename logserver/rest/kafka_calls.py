"""Kafka requests run in-process through the broker's own handlers, as one principal.

The REST Proxy asks what a Kafka client would ask, through the same handler code
(cluster mode's variants included), so validation, limits and ACL checks are the Kafka
path's. Each call sets the request context a dispatcher would set for a connection.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode, RequestHeader
from kafkaproto.client import Backoff, Failures
from kafkaproto.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    ProduceResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from logserver import request_context
from logserver.handlers import HANDLERS
from logserver.rest import to_node
from logserver.security import checks
from logserver.security.session import current_security

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

CLIENT_ID = "rest-proxy"
REST_LISTENER = "REST_PROXY"
# Versions asked for: ones every handler serves (see logserver/handlers/__init__.py).
_VERSIONS = {ApiKey.PRODUCE: 9, ApiKey.LIST_OFFSETS: 7, ApiKey.OFFSET_COMMIT: 8,
             ApiKey.OFFSET_FETCH: 7, ApiKey.JOIN_GROUP: 7, ApiKey.SYNC_GROUP: 5,
             ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 5, ApiKey.FIND_COORDINATOR: 3}
GROUP_CALL_TIMEOUT_S = 30.0
# A consumer's offset calls retry these for a while, every retry.backoff.ms (Kafka's 100).
COORDINATOR_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
OFFSETS_RETRY_S = 10.0
#: Between tries while the coordinator is chosen or loads (retry.backoff.ms / .max.ms).
OFFSETS_BACKOFF = Backoff(100, 1000)
EARLIEST, LATEST = -2, -1

PartitionResponse = ProduceResponse.PartitionProduceResponse


def act_as(principal: str, peer: str) -> None:
    """The request context of the current task: who asks, from where."""
    request_context.set_peer(peer)
    request_context.principal.set(principal)
    request_context.listener_name.set(REST_LISTENER)
    current_security.set(None)


async def _call(broker: WithCluster, key: ApiKey, body: Any, client_id: str = CLIENT_ID) -> Any:
    header = RequestHeader(key, _VERSIONS[key], 0, client_id)
    result = HANDLERS[key].handle(broker, header, body)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _coordinator(broker: WithCluster, group: str) -> int | None:
    """The node coordinating ``group``, as this broker's FindCoordinator answers it."""
    if not broker.routing.replicated:  # a single node coordinates every group
        return None
    response = await _call(broker, ApiKey.FIND_COORDINATOR,
                           FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[]))
    return None if response.error_code else int(response.node_id)


async def _group_call(broker: WithCluster, key: ApiKey, body: Any, group: str, refused: bool,
                      client_id: str = CLIENT_ID, timeout_s: float = GROUP_CALL_TIMEOUT_S) -> Any:
    """A group API call, answered by the group's coordinator: in-process here, else over
    the Kafka protocol to the coordinator. What this principal may not do (``refused``,
    checked here as the far broker cannot: it sees the inter-broker identity), and what
    cannot be sent, this broker's handler answers (an ACL error, NOT_COORDINATOR)."""
    node = await _coordinator(broker, group) if not refused else None
    if node is not None and node != broker.node_id:
        try:
            return await to_node.send(broker, node, key, _VERSIONS[key], body, timeout_s,
                                      client_id)
        except to_node.NodeUnreachable:
            pass
    return await _call(broker, key, body, client_id)


def _retry(deadline: float, errors: list[int]) -> bool:
    """Whether an offsets call met a coordinator being chosen or loading, with time left."""
    return any(e in COORDINATOR_RETRIABLE for e in errors) \
        and asyncio.get_running_loop().time() < deadline


def _refused(broker: WithCluster, group_rule: Any, group: str, topic_rule: Any = None,
             topics: Any = ()) -> bool:
    return bool(checks.denied(broker, group_rule, group)) or (
        topic_rule is not None and any(checks.denied(broker, topic_rule, t) for t in topics))


async def produce(broker: WithCluster, topic: str, batches: dict[int, bytes],
                  timeout_ms: int = 30_000) -> list[PartitionResponse]:
    """One Produce (acks=all) of one batch per partition; the answer per partition."""
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            # The append writes offsets into the batch: a writable copy, as a frame is.
            ProduceRequest.PartitionProduceData(index=p, records=memoryview(bytearray(batch)))
            for p, batch in batches.items()])])
    response = await _call(broker, ApiKey.PRODUCE, request)
    return [p for t in response.responses for p in t.partition_responses]


async def list_offsets(broker: WithCluster, topic: str, partitions: list[int],
                       timestamp: int, committed: bool = False) -> dict[int, tuple[int, int]]:
    """Partition -> (error, offset) for EARLIEST/LATEST/a time, as ListOffsets answers
    (LATEST is the last stable offset for read_committed); asked of each partition's
    leader (in cluster mode another broker's, when this principal may describe the topic)."""
    by_node: dict[int | None, list[int]] = {}
    refused = bool(checks.denied(broker, checks.LIST_OFFSETS, topic))
    for p in partitions:
        node = None if refused else to_node.remote_leader(broker, topic, p)
        by_node.setdefault(node, []).append(p)
    found: dict[int, tuple[int, int]] = {}
    for node, indexes in by_node.items():
        request = ListOffsetsRequest(replica_id=-1, isolation_level=int(committed), topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                for p in indexes])])
        response: Any = None
        if node is not None:
            try:
                response = await to_node.send(broker, node, ApiKey.LIST_OFFSETS,
                                              _VERSIONS[ApiKey.LIST_OFFSETS], request,
                                              GROUP_CALL_TIMEOUT_S)
            except to_node.NodeUnreachable:
                response = None
        if response is None:
            response = await _call(broker, ApiKey.LIST_OFFSETS, request)
        found.update({p.partition_index: (p.error_code, p.offset)
                      for t in response.topics for p in t.partitions})
    return found


async def commit_offsets(broker: WithCluster, group: str, offsets: dict[tuple[str, int], int],
                         generation: int = -1, member_id: str = "") -> dict[tuple[str, int], int]:
    """OffsetCommit as a group member (or a standalone consumer: generation -1); error
    per partition."""
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset))
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation,
                                  member_id=member_id,
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=t, partitions=ps) for t, ps in by_topic.items()])
    refused = _refused(broker, checks.OFFSET_COMMIT_GROUP, group, checks.OFFSET_COMMIT_TOPIC,
                       by_topic)
    deadline = asyncio.get_running_loop().time() + OFFSETS_RETRY_S
    failures = Failures(OFFSETS_BACKOFF)
    while True:
        response = await _group_call(broker, ApiKey.OFFSET_COMMIT, request, group, refused)
        if not _retry(deadline, [p.error_code for t in response.topics for p in t.partitions]):
            break
        await asyncio.sleep(failures.failed())
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


async def fetch_offsets(broker: WithCluster, group: str, wanted: list[tuple[str, int]]) -> (
        tuple[int, dict[tuple[str, int], tuple[int, int, str]]]):
    """OffsetFetch: (group error, (topic, partition) -> (error, offset or -1, metadata))."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
        for t, ps in by_topic.items()])
    refused = _refused(broker, checks.OFFSET_FETCH_GROUP, group, checks.OFFSET_FETCH_TOPIC,
                       by_topic)
    deadline = asyncio.get_running_loop().time() + OFFSETS_RETRY_S
    failures = Failures(OFFSETS_BACKOFF)
    while True:
        response = await _group_call(broker, ApiKey.OFFSET_FETCH, request, group, refused)
        if not _retry(deadline, [response.error_code]):
            break
        await asyncio.sleep(failures.failed())
    return response.error_code, {
        (t.name, p.partition_index): (p.error_code, p.committed_offset, p.metadata or "")
        for t in response.topics for p in t.partitions}


async def join_group(broker: WithCluster, group: str, member_id: str, client_id: str,
                     session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: list[tuple[str, bytes]]) -> JoinGroupResponse:
    """JoinGroup (answered when the rebalance completes)."""
    request = JoinGroupRequest(
        group_id=group, session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
        protocol_type=protocol_type, protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
            for name, metadata in protocols])
    response: JoinGroupResponse = await _group_call(
        broker, ApiKey.JOIN_GROUP, request, group, _refused(broker, checks.JOIN_GROUP, group),
        client_id, rebalance_timeout_ms / 1000 + GROUP_CALL_TIMEOUT_S)
    return response


async def sync_group(broker: WithCluster, group: str, generation: int, member_id: str,
                     client_id: str, protocol_type: str, protocol_name: str,
                     assignments: dict[str, bytes]) -> SyncGroupResponse:
    request = SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        protocol_type=protocol_type, protocol_name=protocol_name, assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in assignments.items()])
    response: SyncGroupResponse = await _group_call(
        broker, ApiKey.SYNC_GROUP, request, group, _refused(broker, checks.SYNC_GROUP, group),
        client_id)
    return response


async def heartbeat(broker: WithCluster, group: str, generation: int, member_id: str,
                    client_id: str) -> int:
    request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    response = await _group_call(broker, ApiKey.HEARTBEAT, request, group,
                                 _refused(broker, checks.HEARTBEAT, group), client_id)
    return int(response.error_code)


async def leave_group(broker: WithCluster, group: str, member_id: str, client_id: str) -> int:
    request = LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=member_id, reason="REST consumer deleted")])
    response = await _group_call(broker, ApiKey.LEAVE_GROUP, request, group,
                                 _refused(broker, checks.LEAVE_GROUP, group), client_id)
    return int(response.error_code)


def read_error(broker: WithCluster, topic: str, partition: int) -> int:
    """Why this principal may not read the partition here (Fetch's checks), or NONE."""
    refused = checks.denied(broker, checks.FETCH, topic)
    if refused:
        return refused
    count = broker.topics.partition_count(topic)
    if count is None or not 0 <= partition < count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error = broker.routing.leader_error(topic, partition)
    if error == ErrorCode.NOT_LEADER_OR_FOLLOWER \
            and to_node.remote_leader(broker, topic, partition) is not None:
        return ErrorCode.NONE  # read from its leader (logserver.rest.remote_reads)
    return error
