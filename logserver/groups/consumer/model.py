"""One consumer group of the KIP-848 protocol: members, epochs, target assignment.

Kafka's ConsumerGroup and ConsumerGroupMember, as plain data. Partitions are kept by
topic name here; topic ids are the wire's business (the handlers map them), so a
topic deleted and created again under its name simply has a new id on the wire.

Epochs, as in KIP-848: the *group epoch* goes up whenever what the assignor would see
changes (a member joins or leaves, a subscription changes, a subscribed topic gains
partitions); the *assignment epoch* is the group epoch the current target assignment
was computed for; a *member epoch* is the assignment epoch the member has caught up
with. A member moves to a newer epoch only after it has given up (revoked) what the
new target takes from it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from logserver.groups.decisions import TimerKey

Partitions = dict[str, set[int]]  # topic name -> partitions

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class GroupState(enum.Enum):
    """Kafka's ConsumerGroupState names (ListGroups, ConsumerGroupDescribe)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """Kafka's MemberState: where a member is on its way to its target assignment."""

    STABLE = "stable"  # has its whole target
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # must give some partitions up first
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for others to give some up
    # The values persisted in ConsumerGroupCurrentMemberAssignmentValue.State:
    @property
    def code(self) -> int:
        return {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}[self.value]

    @classmethod
    def from_code(cls, code: int) -> MemberState:
        return {0: cls.STABLE, 1: cls.UNREVOKED_PARTITIONS,
                2: cls.UNRELEASED_PARTITIONS}.get(code, cls.STABLE)


def copy_partitions(partitions: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in partitions.items() if ps}


def count(partitions: Partitions) -> int:
    return sum(len(ps) for ps in partitions.values())


def minus(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def intersect(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps & b[t] for t, ps in a.items() if t in b and ps & b[t]}


def union(a: Partitions, b: Partitions) -> Partitions:
    out = copy_partitions(a)
    for t, ps in b.items():
        if ps:
            out.setdefault(t, set()).update(ps)
    return out


def same(a: Partitions, b: Partitions) -> bool:
    return copy_partitions(a) == copy_partitions(b)


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)  # usable now
    revoking: Partitions = field(default_factory=dict)  # to give up before moving on
    owned: Partitions | None = None  # what the member said it owns, last time it said
    session_timer: TimerKey | None = None
    revocation_timer: TimerKey | None = None

    def owns(self) -> Partitions:
        """Every partition the coordinator counts as this member's: usable or revoking."""
        return union(self.assigned, self.revoking)


class ConsumerGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.created_ms = now_ms
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Partitions] = {}  # member id -> target partitions
        self.assignor: str | None = None  # the one used for the current target
        # partition counts of the subscribed topics the target was computed with
        self.topic_partitions: dict[str, int] = {}
        # restored from the log: the MetadataHash of those counts (they are not stored),
        # until the first heartbeat compares the topics of now with it
        self.restored_metadata_hash: int | None = None
        # what ``__consumer_offsets`` holds for this group: key -> value
        self.persisted: dict[bytes, bytes] = {}
        # (topic names, regexes) the members subscribe to; None: to be recomputed
        self.subscription_cache: tuple[frozenset[str], frozenset[str]] | None = None

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch {self.group_epoch}, "
                f"{len(self.members)} members)")

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for member in self.members.values():
            if member.epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def add(self, member: Member) -> None:
        self.subscription_cache = None
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        self.subscription_cache = None
        member = self.members.pop(member_id, None)
        if (member is not None and member.instance_id is not None
                and self.static_members.get(member.instance_id) == member_id):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def subscriptions(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every topic name and every regex some member subscribes to (cached)."""
        if self.subscription_cache is None:
            names: set[str] = set()
            regexes: set[str] = set()
            for member in self.members.values():
                names.update(member.subscribed_names)
                if member.subscribed_regex:
                    regexes.add(member.subscribed_regex)
            self.subscription_cache = (frozenset(names), frozenset(regexes))
        return self.subscription_cache

    def owners(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> the member that holds it (assigned or being revoked)."""
        out: dict[tuple[str, int], str] = {}
        for member in self.members.values():
            for topic, partitions in member.owns().items():
                for partition in partitions:
                    out[(topic, partition)] = member.member_id
        return out
