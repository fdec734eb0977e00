"""The consumer group protocol (KIP-848) as a state machine without I/O or asyncio.

Kafka's GroupMetadataManager for consumer groups, decision by decision, on the same
``decisions.py`` vocabulary as the classic machine: every event comes in with the time
(and a view of the topics) and returns requests to answer, timers to arm or cancel, and
records to append to ``__consumer_offsets``. A heartbeat is answered only once the
records it caused are as durable as the broker's durability setting promises.

One heartbeat does everything the protocol needs, in this order:

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION);
2. find or create the group and the member: epoch 0 joins (a static member whose
   instance id is held by a member that did not leave with epoch -2 gets
   UNRELEASED_INSTANCE_ID), a known member must send its current epoch (or, when our
   last answer was lost, its previous one with no partitions it was not given), else
   FENCED_MEMBER_EPOCH; an unknown member gets UNKNOWN_MEMBER_ID;
3. apply the member's changes; a new member, a changed subscription or a subscribed
   topic with a different partition count bumps the group epoch;
4. when the group epoch is ahead of the target assignment, the configured assignor
   (``group.consumer.assignors``; a member may name one, the most named wins) computes a
   new target for everyone;
5. move this member toward its target (``reconcile.py``: revoke before assign);
6. arm its session timer (``group.consumer.session.timeout.ms``), and a revocation timer
   (its rebalance timeout) while it holds partitions it must give up.

A member that leaves (epoch -1), misses its session timeout or does not revoke in time
is removed and the group epoch bumped; the others pick up its partitions on their next
heartbeats. A static member that leaves with epoch -2 keeps its partitions and its
place until its session expires, so a restart under the same instance id resumes them.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafkaproto import ErrorCode
from logserver.groups.consumer import records as rec
from logserver.groups.consumer.assignors import ASSIGNORS
from logserver.groups.consumer.model import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    Member,
    MemberState,
    Partitions,
    count,
    minus,
    same,
)
from logserver.groups.consumer.reconcile import reconcile
from logserver.groups.decisions import (
    Append,
    ArmTimer,
    CancelTimer,
    Decision,
    DecisionMaker,
    Reply,
    RequestId,
    TimerKey,
    TimerKind,
)

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroups", "ConsumerSettings", "HeartbeatRequest", "HeartbeatResult",
           "NOT_A_CONSUMER_GROUP", "TopicCatalog"]

#: ``validate_*`` answer for a group id this machine does not know (the classic rules apply)
NOT_A_CONSUMER_GROUP = -1


class TopicCatalog(Protocol):
    """What the machine needs to know about topics (the broker's storage has it)."""

    def topic_names(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int | None: ...

    def topic_id(self, topic: str) -> bytes | None: ...

    def topic_for_id(self, topic_id: bytes) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ConsumerSettings:
        return cls(config["group.consumer.session.timeout.ms"],
                   config["group.consumer.heartbeat.interval.ms"],
                   tuple(config["group.consumer.assignors"]),
                   config["group.consumer.max.size"])


@dataclass(slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, partitions by topic name (the handler maps the ids)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: list[str] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


@dataclass(frozen=True, slots=True)
class ConsumerWritten:
    """Records of one group appended; ``request`` is answered with ``result`` then."""

    group_id: str
    request: RequestId | None
    result: Any


class _Refused(Exception):
    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _new_member_id() -> str:
    return str(uuid.uuid4())


class ConsumerGroups(DecisionMaker):
    """Every consumer-protocol group of this node."""

    def __init__(self, settings: ConsumerSettings | None = None, *,
                 new_member_id: Callable[[], str] = _new_member_id) -> None:
        super().__init__()
        self.settings = settings or ConsumerSettings()
        self.groups: dict[str, ConsumerGroup] = {}
        self._new_member_id = new_member_id
        self._regex_cache: dict[str, re.Pattern[str]] = {}
        # members whose records the event being handled may have changed (all: a new target)
        self._touched: set[str] = set()
        self._touched_all = False

    # -- plumbing --------------------------------------------------------------------------

    def _arm(self, key: TimerKey, delay_ms: int) -> None:
        self._out.append(ArmTimer(key, delay_ms))

    def _cancel(self, key: TimerKey | None) -> None:
        if key is not None:
            self._out.append(CancelTimer(key))

    def _regex(self, pattern: str) -> re.Pattern[str]:
        compiled = self._regex_cache.get(pattern)
        if compiled is None:
            compiled = self._regex_cache[pattern] = re.compile(pattern)
        return compiled

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------

    def heartbeat(self, now_ms: int, request: RequestId, hb: HeartbeatRequest,
                  catalog: TopicCatalog) -> list[Decision]:
        """Answers ``request`` with a ``HeartbeatResult`` once its records are durable."""
        self._begin(now_ms)
        self._touched, self._touched_all = set(), False
        touched: ConsumerGroup | None = None
        try:
            touched, result = self._heartbeat(hb, catalog)
        except _Refused as refused:
            log.debug("group %s: heartbeat of %s refused: %s", hb.group_id, hb.member_id,
                      refused.message)
            result = HeartbeatResult(refused.error, refused.message)
            created = self.groups.get(hb.group_id)
            if created is not None and not created.members and not created.persisted:
                del self.groups[hb.group_id]  # a refused first join creates no group
        appended = self._persist(touched, catalog, request, result) if touched else False
        if not appended:
            self._out.append(Reply(request, result))
        return self._done()

    def _validate(self, hb: HeartbeatRequest) -> None:
        invalid = ErrorCode.INVALID_REQUEST
        if not hb.group_id:
            raise _Refused(invalid, "GroupId can't be empty.")
        if hb.instance_id is not None and not hb.instance_id:
            raise _Refused(invalid, "InstanceId can't be empty.")
        if hb.version >= 1 and not hb.member_id:
            raise _Refused(invalid, "MemberId can't be empty.")
        epoch = hb.member_epoch
        if epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                raise _Refused(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if hb.owned:
                raise _Refused(invalid, "TopicPartitions must be empty when (re-)joining.")
            if hb.subscribed_names is None and hb.subscribed_regex is None:
                raise _Refused(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be "
                                        "set in first request.")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise _Refused(invalid, f"MemberEpoch {epoch} is invalid.")
        elif not hb.member_id:
            raise _Refused(invalid, "MemberId can't be empty.")
        if epoch == STATIC_LEAVE_EPOCH and hb.instance_id is None:
            raise _Refused(invalid, "InstanceId can't be null when leaving with MemberEpoch -2.")
        if hb.server_assignor is not None and hb.server_assignor not in self.settings.assignors:
            raise _Refused(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {hb.server_assignor} is not supported. Supported "
                           f"assignors: {', '.join(self.settings.assignors)}.")
        if hb.subscribed_regex:
            try:
                self._regex(hb.subscribed_regex)
            except re.error as exc:
                raise _Refused(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex {hb.subscribed_regex} is invalid: {exc}") from exc

    def _heartbeat(self, hb: HeartbeatRequest, catalog: TopicCatalog
                   ) -> tuple[ConsumerGroup | None, HeartbeatResult]:
        self._validate(hb)
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb)
        group = self.groups.get(hb.group_id)
        if group is None:
            if hb.member_epoch != 0:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {hb.member_id} is not a member of group {hb.group_id}.")
            group = self.groups[hb.group_id] = ConsumerGroup(hb.group_id, self._now)
            log.info("consumer group %s created", hb.group_id)
        member, is_new = self._member(group, hb)
        self._touched.add(member.member_id)
        changed = self._apply_changes(member, hb)
        if changed:
            group.subscription_cache = None
        bumped = False
        if is_new or changed:
            bumped = self._bump(group, f"member {member.member_id} "
                                       f"{'joined' if is_new else 'changed its subscription'}")
        self._refresh_metadata(group, catalog, bumped)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, catalog)
        if hb.owned is not None:
            member.owned = hb.owned
        before = dict(member.assigned)
        owners: dict[tuple[str, int], str] | None = None

        def held_by_other(topic: str, partition: int) -> bool:
            nonlocal owners
            if owners is None:  # only needed when the member is due new partitions
                owners = group.owners()
            return owners.get((topic, partition), member.member_id) != member.member_id

        reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                  held_by_other, hb.owned if hb.member_epoch != 0 else {})
        self._arm_member_timers(group, member)
        full = (hb.rebalance_timeout_ms != -1 and hb.owned is not None
                and (hb.subscribed_names is not None or hb.subscribed_regex is not None))
        send_assignment = hb.member_epoch == 0 or full or not same(before, member.assigned)
        return group, HeartbeatResult(
            ErrorCode.NONE, None, member.member_id, member.epoch,
            self.settings.heartbeat_interval_ms,
            {t: set(ps) for t, ps in member.assigned.items()} if send_assignment else None)

    def _member(self, group: ConsumerGroup, hb: HeartbeatRequest) -> tuple[Member, bool]:
        """The heartbeating member (created or taken over when joining), and whether new."""
        if hb.member_epoch == 0:
            member_id = hb.member_id or self._new_member_id()
            if hb.instance_id is not None:
                holder = group.static_members.get(hb.instance_id)
                if holder is not None and holder != member_id:
                    old = group.members[holder]
                    if old.epoch != STATIC_LEAVE_EPOCH:
                        raise _Refused(ErrorCode.UNRELEASED_INSTANCE_ID,
                                       f"Static member {holder} with instance id "
                                       f"{hb.instance_id} is still active.")
                    return self._replace_static(group, old, member_id), False
            member = group.members.get(member_id)
            if member is not None:
                return member, False
            if len(group.members) >= self.settings.max_size:
                raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The consumer group has reached its maximum capacity of "
                               f"{self.settings.max_size} members.")
            member = Member(member_id, instance_id=hb.instance_id)
            group.add(member)
            log.info("group %s: member %s joins (instance %s)", group.group_id, member_id,
                     hb.instance_id)
            return member, True
        member = group.members.get(hb.member_id)
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                           f"Member {hb.member_id} is not a member of group {group.group_id}.")
        if hb.instance_id is not None:
            holder = group.static_members.get(hb.instance_id)
            if holder is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Instance id {hb.instance_id} is unknown.")
            if holder != member.member_id:
                raise _Refused(ErrorCode.FENCED_INSTANCE_ID,
                               f"Instance id {hb.instance_id} belongs to member {holder}.")
        epoch = hb.member_epoch
        if epoch > member.epoch or (epoch < member.epoch and not (
                epoch == member.previous_epoch and hb.owned is not None
                and not minus(hb.owned, member.assigned))):
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The member epoch {epoch} of {member.member_id} is fenced; "
                           f"the current epoch is {member.epoch}.")
        return member, False

    def _replace_static(self, group: ConsumerGroup, old: Member, member_id: str) -> Member:
        """A static member back under its instance id: the new member id takes over the
        old one's partitions and target (no rebalance, as in Kafka)."""
        log.info("group %s: static member %s rejoins as %s", group.group_id, old.instance_id,
                 member_id)
        self._cancel(old.session_timer)
        self._cancel(old.revocation_timer)
        target = group.target.get(old.member_id, {})
        self._touched.add(old.member_id)
        group.remove(old.member_id)
        member = Member(member_id, instance_id=old.instance_id, rack_id=old.rack_id,
                        client_id=old.client_id, client_host=old.client_host,
                        rebalance_timeout_ms=old.rebalance_timeout_ms,
                        subscribed_names=old.subscribed_names,
                        subscribed_regex=old.subscribed_regex,
                        server_assignor=old.server_assignor, epoch=old.previous_epoch,
                        previous_epoch=old.previous_epoch, state=old.state,
                        assigned=old.assigned, revoking=old.revoking)
        group.add(member)
        group.target[member_id] = target
        return member

    def _apply_changes(self, member: Member, hb: HeartbeatRequest) -> bool:
        """Take what the heartbeat carries; True if what the assignor sees changed."""
        if hb.client_id:
            member.client_id = hb.client_id
        if hb.client_host:
            member.client_host = hb.client_host
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        changed = False
        if hb.subscribed_names is not None:
            names = tuple(sorted(set(hb.subscribed_names)))
            changed |= names != member.subscribed_names
            member.subscribed_names = names
        if hb.subscribed_regex is not None:
            regex = hb.subscribed_regex or None  # "" clears it
            changed |= regex != member.subscribed_regex
            member.subscribed_regex = regex
        if hb.server_assignor is not None and hb.server_assignor != member.server_assignor:
            member.server_assignor = hb.server_assignor
            changed = True
        return changed

    def _bump(self, group: ConsumerGroup, why: str) -> bool:
        group.group_epoch += 1
        log.info("group %s: epoch %d (%s)", group.group_id, group.group_epoch, why)
        return True

    def _subscriptions(self, group: ConsumerGroup, catalog: TopicCatalog
                       ) -> dict[str, frozenset[str]]:
        names: list[str] | None = None
        out: dict[str, frozenset[str]] = {}
        for member in group.members.values():
            topics = set(member.subscribed_names)
            if member.subscribed_regex:
                if names is None:
                    names = [n for n in catalog.topic_names() if not n.startswith("__")]
                pattern = self._regex(member.subscribed_regex)
                topics.update(n for n in names if pattern.fullmatch(n))
            out[member.member_id] = frozenset(topics)
        return out

    def _subscribed_topics(self, group: ConsumerGroup, catalog: TopicCatalog) -> set[str]:
        names, regexes = group.subscriptions()
        topics = set(names)
        if regexes:
            existing = [n for n in catalog.topic_names() if not n.startswith("__")]
            for regex in regexes:
                pattern = self._regex(regex)
                topics.update(n for n in existing if pattern.fullmatch(n))
        return topics

    def _refresh_metadata(self, group: ConsumerGroup, catalog: TopicCatalog,
                          bumped: bool) -> None:
        """A subscribed topic created, deleted or grown bumps the group epoch."""
        topics = self._subscribed_topics(group, catalog)
        counts = {}
        for topic in topics:
            n = catalog.partition_count(topic)
            if n:
                counts[topic] = n
        restored, group.restored_metadata_hash = group.restored_metadata_hash, None
        if counts != group.topic_partitions:
            group.topic_partitions = counts
            if restored is not None and restored == rec.metadata_hash(counts, catalog.topic_id):
                return  # loaded from the log: the topics are those its epoch was set with
            if not bumped:
                self._bump(group, "the subscribed topics' partitions changed")

    def _compute_target(self, group: ConsumerGroup, catalog: TopicCatalog) -> None:
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        name = votes.most_common(1)[0][0] if votes else self.settings.assignors[0]
        subscriptions = self._subscriptions(group, catalog)
        group.target = ASSIGNORS[name](subscriptions, group.topic_partitions, group.target)
        group.assignor = name
        group.assignment_epoch = group.group_epoch
        self._touched_all = True
        counts = [count(ps) for ps in group.target.values()]
        log.info("group %s: target assignment of epoch %d by %s: %d partitions over %d "
                 "members (%d-%d each)", group.group_id, group.assignment_epoch, name,
                 sum(counts), len(counts), min(counts, default=0), max(counts, default=0))

    def _arm_member_timers(self, group: ConsumerGroup, member: Member) -> None:
        member.session_timer = TimerKey(TimerKind.CONSUMER_SESSION, group.group_id,
                                        member.member_id)
        self._arm(member.session_timer, self.settings.session_timeout_ms)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_timer is None:
                member.revocation_timer = TimerKey(TimerKind.CONSUMER_REVOCATION,
                                                   group.group_id, member.member_id,
                                                   member.epoch)
                self._arm(member.revocation_timer, member.rebalance_timeout_ms)
        elif member.revocation_timer is not None:
            self._cancel(member.revocation_timer)
            member.revocation_timer = None

    # -- leaving ---------------------------------------------------------------------------

    def _leave(self, hb: HeartbeatRequest) -> tuple[ConsumerGroup | None, HeartbeatResult]:
        group = self.groups.get(hb.group_id)
        member_id = hb.member_id
        if group is not None and hb.instance_id is not None:
            member_id = group.static_members.get(hb.instance_id, "")
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                           f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            log.info("group %s: static member %s (%s) leaves for now; it keeps its partitions "
                     "until its session expires", group.group_id, member_id, hb.instance_id)
            if member.epoch != STATIC_LEAVE_EPOCH:
                member.previous_epoch = member.epoch
            member.epoch = STATIC_LEAVE_EPOCH
            member.session_timer = TimerKey(TimerKind.CONSUMER_SESSION, group.group_id,
                                            member.member_id)
            self._arm(member.session_timer, self.settings.session_timeout_ms)
        else:
            self._remove(group, member, "left the group")
        return group, HeartbeatResult(ErrorCode.NONE, None, hb.member_id, hb.member_epoch,
                                      self.settings.heartbeat_interval_ms)

    def _remove(self, group: ConsumerGroup, member: Member, why: str) -> None:
        self._touched.add(member.member_id)
        self._cancel(member.session_timer)
        self._cancel(member.revocation_timer)
        group.remove(member.member_id)
        log.info("group %s: member %s removed (%s); partitions %s are free", group.group_id,
                 member.member_id, why, {t: sorted(ps) for t, ps in member.owns().items()})
        self._bump(group, f"member {member.member_id} {why}")

    # -- timers ----------------------------------------------------------------------------

    def on_timer(self, now_ms: int, key: TimerKey, catalog: TopicCatalog) -> list[Decision]:
        self._begin(now_ms)
        self._touched, self._touched_all = set(), False
        group = self.groups.get(key.group_id)
        member = group.members.get(key.member_id) if group is not None else None
        if group is None or member is None:
            return self._done()
        if key.kind is TimerKind.CONSUMER_SESSION and member.session_timer == key:
            self._remove(group, member, "session timed out")
        elif (key.kind is TimerKind.CONSUMER_REVOCATION and member.revocation_timer == key
              and member.state is MemberState.UNREVOKED_PARTITIONS):
            self._remove(group, member, "did not revoke its partitions within its rebalance "
                                        "timeout")
        else:
            return self._done()
        self._persist(group, catalog, None, None)
        return self._done()

    # -- persistence -----------------------------------------------------------------------

    def _persist(self, group: ConsumerGroup, catalog: TopicCatalog,
                 request: RequestId | None, result: Any) -> bool:
        """Append the group's records that changed since the last append (tombstones for
        those gone); True if an append carries ``request``'s answer.

        Only the group's own records and those of the members this event touched are
        encoded and compared, unless a new target assignment touched everyone: a steady
        heartbeat costs the same in a group of ten members as in one of a thousand."""
        gid = group.group_id
        if gid not in self.groups:
            desired: dict[bytes, bytes] = {}
            candidates: Iterable[bytes] = list(group.persisted)
        elif self._touched_all:
            desired = self.records_of(group, catalog)
            candidates = list(group.persisted)
        else:
            desired = self.records_of(group, catalog, self._touched)
            candidates = [rec.key(kind, gid, m) for m in self._touched
                          for kind in (rec.MEMBER_METADATA, rec.TARGET_MEMBER, rec.CURRENT_MEMBER)]
        changes: list[tuple[bytes, bytes | None]] = [
            (k, v) for k, v in desired.items() if group.persisted.get(k) != v]
        changes += [(k, None) for k in candidates if k in group.persisted and k not in desired]
        if not changes:
            return False
        for k, v in changes:
            if v is None:
                del group.persisted[k]
            else:
                group.persisted[k] = v
        self._out.append(Append(group.group_id, tuple(changes),
                                ConsumerWritten(group.group_id, request, result)))
        return True

    def records_of(self, group: ConsumerGroup, catalog: TopicCatalog,
                   members: Iterable[str] | None = None) -> dict[bytes, bytes]:
        """The live records of ``group`` (key -> value): the group's own and those of
        ``members`` (default: every member)."""
        gid = group.group_id

        def by_id(partitions: Partitions, cls: Any) -> list[Any]:
            out = []
            for topic in sorted(partitions):
                topic_id = catalog.topic_id(topic)
                if topic_id is not None and partitions[topic]:
                    out.append(cls(topic_id=topic_id, partitions=sorted(partitions[topic])))
            return out

        out = {
            rec.key(rec.GROUP_METADATA, gid): rec.encode_value(rec.GroupMetadataValue(
                epoch=group.group_epoch,
                metadata_hash=rec.metadata_hash(group.topic_partitions, catalog.topic_id))),
            rec.key(rec.TARGET_METADATA, gid): rec.encode_value(
                rec.TargetMetadataValue(assignment_epoch=group.assignment_epoch)),
        }
        chosen = (group.members.values() if members is None
                  else [group.members[m] for m in members if m in group.members])
        for m in chosen:
            out[rec.key(rec.MEMBER_METADATA, gid, m.member_id)] = rec.encode_value(
                rec.MemberMetadataValue(
                    instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                    client_host=m.client_host, subscribed_topic_names=list(m.subscribed_names),
                    subscribed_topic_regex=m.subscribed_regex,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    server_assignor=m.server_assignor))
            out[rec.key(rec.TARGET_MEMBER, gid, m.member_id)] = rec.encode_value(
                rec.TargetMemberValue(topic_partitions=by_id(
                    group.target.get(m.member_id, {}), rec.TargetMemberValue.TopicPartitions)))
            tps = rec.CurrentMemberValue.TopicPartitions
            out[rec.key(rec.CURRENT_MEMBER, gid, m.member_id)] = rec.encode_value(
                rec.CurrentMemberValue(
                    member_epoch=m.epoch, previous_member_epoch=m.previous_epoch,
                    state=m.state.code, assigned_partitions=by_id(m.assigned, tps),
                    partitions_pending_revocation=by_id(m.revoking, tps)))
        return out

    def on_written(self, now_ms: int, written: ConsumerWritten, error: int) -> list[Decision]:
        self._begin(now_ms)
        if error != ErrorCode.NONE:
            log.warning("group %s: cannot persist its state: %s", written.group_id,
                        ErrorCode(error).name)
            if written.request is not None:
                # as Kafka: the heartbeat fails and the member retries
                self._out.append(Reply(written.request, HeartbeatResult(
                    error, "cannot persist the group state")))
                return self._done()
        if written.request is not None:
            self._out.append(Reply(written.request, written.result))
        return self._done()

    # -- restore ---------------------------------------------------------------------------

    def adopt(self, now_ms: int, group: ConsumerGroup) -> list[Decision]:
        """Register a group restored from the log; its members must heartbeat again
        within their session timeout."""
        self._begin(now_ms)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._arm_member_timers(group, member)
        return self._done()

    def unload(self, group_ids: Iterable[str]) -> list[Decision]:
        """Give up these groups: their ``__consumer_offsets`` partition is led elsewhere
        now (Kafka's onUnloaded). Their member timers are cancelled; the new coordinator
        restores them, epochs and assignments included, from the replicated log."""
        self._out = []
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            for member in group.members.values():
                self._cancel(member.session_timer)
                self._cancel(member.revocation_timer)
        return self._done()

    # -- offsets and the other group APIs --------------------------------------------------

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int,
                        version: int | None) -> int | None:
        """None: a member's (or admin's) commit we accept; an error code; or
        ``NOT_A_CONSUMER_GROUP``. ``version`` None: a transactional commit."""
        group = self.groups.get(group_id)
        if group is None:
            return NOT_A_CONSUMER_GROUP
        if member_epoch < 0 and not member_id:
            # the admin client, or a consumer that assigns itself partitions
            return ErrorCode.UNKNOWN_MEMBER_ID if group.members else None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if version is not None and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.epoch:
            log.debug("group %s: commit of %s at epoch %d refused: member epoch %d",
                      group_id, member_id, member_epoch, member.epoch)
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_fetch(self, group_id: str, member_id: str | None,
                       member_epoch: int) -> int | None:
        group = self.groups.get(group_id)
        if group is None or (not member_id and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def delete_group(self, now_ms: int, group_id: str, catalog: TopicCatalog
                     ) -> tuple[int | None, list[Decision]]:
        """DeleteGroups of a consumer group: only an empty one (else NON_EMPTY_GROUP)."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None:
            return NOT_A_CONSUMER_GROUP, self._done()
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, self._done()
        del self.groups[group_id]
        self._touched, self._touched_all = set(), True
        self._persist(group, catalog, None, None)
        log.info("consumer group %s deleted", group_id)
        return None, self._done()

    def subscribed_topics(self, group_id: str, catalog: TopicCatalog) -> set[str]:
        """Topics some member subscribes to (by name, or by regex among existing topics)."""
        group = self.groups.get(group_id)
        return set() if group is None else self._subscribed_topics(group, catalog)

    def list_groups(self) -> Iterable[ConsumerGroup]:
        return self.groups.values()

    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def shutdown(self) -> list[Decision]:
        self._out = []
        for group in self.groups.values():
            for member in group.members.values():
                self._cancel(member.session_timer)
                self._cancel(member.revocation_timer)
        return self._done()
