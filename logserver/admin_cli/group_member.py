"""Membership of a consumer group for ``logserver consume --group``, blocking and minimal.

Join (with Kafka's member-id handshake), sync (the leader assigns with the range
assignor), heartbeat between fetches, commit positions, leave. A rebalance announced by
a heartbeat or a commit is answered by committing and joining again. Only the standard
group APIs, with protocol type "consumer", so other Kafka consumers can share the group.
"""

from __future__ import annotations

import logging
import time

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from .client import BrokerLink, Cluster
from .consumer_protocol import (
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from .errors import CliError, kafka_error
from .offsets import TopicPartition

log = logging.getLogger(__name__)

SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_S = 3.0
ASSIGNOR = "range"
REJOIN = (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
          ErrorCode.UNKNOWN_MEMBER_ID)


class GroupMember:
    """One member of ``group`` subscribed to ``topics``."""

    def __init__(self, cluster: Cluster, group: str, topics: list[str]) -> None:
        self.cluster = cluster
        self.group = group
        self.topics = topics
        self.member_id = ""
        self.generation = -1
        self.assignment: Assignment = {}
        self.link: BrokerLink = cluster.coordinator(group)
        self._last_heartbeat = 0.0

    # ---- joining ------------------------------------------------------------------
    def join(self) -> list[TopicPartition]:
        """Join (or rejoin) the group; the partitions assigned to us."""
        while True:
            response = self._join_once()
            if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id  # KIP-394: join again with it
                continue
            if response.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if response.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if response.error_code:
                raise kafka_error(f"joining group {self.group!r}", response.error_code)
            self.member_id = response.member_id
            self.generation = response.generation_id
            assignments = self._assign(response) if response.leader == self.member_id else []
            sync = self.link.ask(ApiKey.SYNC_GROUP, SyncGroupRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=None, protocol_type="consumer", protocol_name=ASSIGNOR,
                assignments=assignments), ceiling=5,
                timeout=REBALANCE_TIMEOUT_MS / 1000 + self.link.timeout)
            if sync.error_code in REJOIN:
                continue
            if sync.error_code:
                raise kafka_error(f"syncing group {self.group!r}", sync.error_code)
            self.assignment = decode_assignment(bytes(sync.assignment))
            self._last_heartbeat = time.monotonic()
            log.debug("joined %s generation %d as %s: %s", self.group, self.generation,
                      self.member_id, self.assignment)
            return sorted((t, p) for t, ps in self.assignment.items() for p in ps)

    def _join_once(self) -> JoinGroupResponse:
        response: JoinGroupResponse = self.link.ask(ApiKey.JOIN_GROUP, JoinGroupRequest(
            group_id=self.group, session_timeout_ms=SESSION_TIMEOUT_MS,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, member_id=self.member_id,
            group_instance_id=None, protocol_type="consumer", reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name=ASSIGNOR, metadata=encode_subscription(self.topics))]),
            ceiling=9, timeout=REBALANCE_TIMEOUT_MS / 1000 + self.link.timeout)
        return response

    def _assign(self, response: JoinGroupResponse
                ) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        """As the leader: every member's share of the partitions it subscribed to."""
        subscriptions = {m.member_id: decode_subscription(bytes(m.metadata))
                         for m in response.members}
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        counts: dict[str, int] = {}
        for topic in wanted:
            try:
                counts[topic] = len(self.cluster.topic_partitions(topic))
            except CliError:
                continue  # a topic another member wants and that does not exist
        shares = range_assign(subscriptions, counts)
        return [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=encode_assignment(share))
            for member, share in shares.items()]

    # ---- while consuming ----------------------------------------------------------
    def heartbeat_due(self) -> bool:
        return time.monotonic() - self._last_heartbeat >= HEARTBEAT_INTERVAL_S

    def heartbeat(self) -> bool:
        """Tell the coordinator we are alive; False when the group rebalances."""
        response = self.link.ask(ApiKey.HEARTBEAT, HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None), ceiling=4)
        self._last_heartbeat = time.monotonic()
        if response.error_code in REJOIN:
            return False
        if response.error_code:
            raise kafka_error(f"heartbeat to group {self.group!r}", response.error_code)
        return True

    def committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (absent: none committed)."""
        if not partitions:
            return {}
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        version = self.link.version(ApiKey.OFFSET_FETCH, 8)
        request = OffsetFetchRequest(
            group_id=self.group, require_stable=False,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()],
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=self.group, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in topics.items()])])
        response = self.link.request(ApiKey.OFFSET_FETCH, version, request)
        answer = response.groups[0] if version >= 8 else response
        out: dict[TopicPartition, int] = {}
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code:
                    raise kafka_error(f"committed offset of {t.name}-{p.partition_index}",
                                      p.error_code)
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def commit(self, positions: dict[TopicPartition, int]) -> bool:
        """Commit ``positions``; False when the group has moved on (rebalance)."""
        if not positions:
            return True
        topics: dict[str, list[tuple[int, int]]] = {}
        for (t, p), offset in sorted(positions.items()):
            topics.setdefault(t, []).append((p, offset))
        Partition = OffsetCommitRequest.OffsetCommitRequestPartition
        response = self.link.ask(ApiKey.OFFSET_COMMIT, OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.generation,
            member_id=self.member_id, group_instance_id=None, retention_time_ms=-1,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[
                Partition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                          commit_timestamp=-1, committed_metadata="") for p, o in parts])
                for t, parts in topics.items()]), ceiling=8)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code in REJOIN:
                    return False
                if p.error_code:
                    raise kafka_error(f"committing {t.name}-{p.partition_index}", p.error_code)
        return True

    def leave(self) -> None:
        if not self.member_id:
            return
        self.link.ask(ApiKey.LEAVE_GROUP, LeaveGroupRequest(
            group_id=self.group, member_id=self.member_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                                 group_instance_id=None, reason=None)]),
            ceiling=5)
        self.member_id = ""
