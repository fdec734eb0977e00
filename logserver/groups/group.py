"""One classic consumer group and its members: the state Kafka's GroupMetadata keeps.

Pure bookkeeping, no I/O and no asyncio: the membership state machine drives transitions
and decides what to persist. A parked JoinGroup/SyncGroup is held here as an opaque
request id and an armed timer as its ``TimerKey``; the coordinator's glue maps them to
futures and loop handles.

The broker stays assignor-agnostic: member metadata and assignments are opaque bytes;
only the subscribed topic names are read (best effort) from the "consumer" protocol,
as Kafka does for OffsetDelete and offset expiry.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections import Counter
from dataclasses import dataclass, field

from logserver.groups.decisions import RequestId, TimerKey

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """Kafka's names: ListGroups/DescribeGroups report ``.value``."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinResult:
    """What one JoinGroup response carries (version-independent)."""

    member_id: str
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_request: RequestId | None = None  # a parked JoinGroup
    sync_request: RequestId | None = None  # a parked SyncGroup
    is_new: bool = False
    heartbeat_timer: TimerKey | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_request is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_request is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    log_offset: int = -1  # where its record is in __consumer_offsets: newer wins


class Group:
    """Membership, generation, protocol and committed offsets of one group."""

    def __init__(self, group_id: str, now_ms: int,
                 state: GroupState = GroupState.EMPTY, incarnation: int = 0) -> None:
        self.group_id = group_id
        # tells a group apart from an earlier one of the same id (deleted, then recreated)
        self.incarnation = incarnation
        self.state = state
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, TimerKey] = {}  # KIP-394 ids handed out
        self.pending_sync: set[str] = set()
        self.awaiting_join = 0
        self._supported: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        # rebalance timers armed by the membership state machine
        self.join_timer: TimerKey | None = None
        self.join_delay_ms = 0
        self.join_is_initial = False
        self.initial_remaining_ms = 0
        self.sync_timer: TimerKey | None = None
        # committed offsets: (topic, partition) -> offset, and commits not yet durable
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.pending_commits: Counter[tuple[str, int]] = Counter()
        self.persisted_value: bytes | None = None  # last GroupMetadataValue in the log

    def __repr__(self) -> str:
        return (f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id}, "
                f"{len(self.members)} members)")

    # -- state --------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition "
                               f"{self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- members ------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, request: RequestId | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(name for name, _ in member.protocols)
        member.join_request = request
        if request is not None:
            self.awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(name for name, _ in member.protocols)
            if member.is_awaiting_join:
                self.awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      request: RequestId | None) -> RequestId | None:
        """Returns the JoinGroup this one replaces, which its caller must still answer."""
        self._supported.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self._supported.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        old = member.join_request
        if request is not None and old is None:
            self.awaiting_join += 1
        elif request is None and old is not None:
            self.awaiting_join -= 1
        member.join_request = request
        return old

    def take_join(self, member: Member) -> RequestId | None:
        """The member's parked JoinGroup, now no longer parked (None if there is none)."""
        request, member.join_request = member.join_request, None
        if request is not None:
            self.awaiting_join -= 1
        return request

    def take_sync(self, member: Member) -> RequestId | None:
        request, member.sync_request = member.sync_request, None
        return request

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with an unknown member id: it takes over the old one.

        The caller answers the old id's parked requests first."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick one that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                log.info("group %s: leader %s did not rejoin in time; %s leads now",
                         self.group_id, self.leader_id, member.member_id)
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        count = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self._supported[name] == count for name in protocols))

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        count = len(self.members)
        candidates = {name for name, n in self._supported.items() if n == count}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])  # ties: first voted, deterministic

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # -- subscriptions (consumer protocol) ----------------------------------------------

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None when unknown (then assume subscribed)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                log.warning("group %s: cannot parse the consumer protocol subscription of %s; "
                            "treating every topic as subscribed", self.group_id, member.member_id)
                return None
            topics |= parsed
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- offsets ------------------------------------------------------------------------

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(+self.pending_commits)

    def live_records(self) -> int:
        """Records of this group a compacted ``__consumer_offsets`` would keep."""
        return len(self.offsets) + (self.persisted_value is not None)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(data: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: v0 is the prefix of all)."""
    try:
        pos = 2  # int16 version
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0 or count > len(data):
            return None
        topics = set()
        for _ in range(count):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topics.add(data[pos:pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
