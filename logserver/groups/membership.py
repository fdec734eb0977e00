"""The classic group membership protocol as a state machine without I/O or asyncio.

This follows Apache Kafka's GroupCoordinator (3.x, classic protocol) decision by
decision, so clients see the same states, generations and error codes; where this file
says "Kafka" it means that code. Every event (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, a fired timer, a group record that became durable) comes in with the
current time and returns decisions (``decisions.py``): requests to answer, timers to arm
or cancel, records to append. Nothing here waits; the coordinator's glue does.

Timers, as in Kafka's purgatories: one heartbeat timer per member (session timeout;
five minutes for a new member still waiting in JoinGroup), one join timer per group
(initial delay for an empty group, else the rebalance timeout), one sync timer per
generation (members that never send SyncGroup are dropped), one timer per member id
handed out with MEMBER_ID_REQUIRED. Nothing polls: every timer is re-armed or cancelled
by the event that satisfies it.

A parked JoinGroup/SyncGroup is a request id the caller chose; a client that
disconnects does not tell us, so the member stays until its timers say otherwise, as in
Kafka (which cannot see disconnects of muted sockets either). The group only moves on
after a group record write (assignment handed out, static member replaced) once the
glue reports the append durable.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import logserver.groups.records as rec
from kafkaproto import ErrorCode
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
from logserver.groups.group import Group, GroupState, JoinResult, Member, SyncResult

log = logging.getLogger(__name__)

MAX_GROUP_ID_LENGTH = 255
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's NewMemberJoinTimeoutMs
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD)

# (member_id, group_instance_id, reason) of one LeaveGroup member
LeavingMember = tuple[str, str | None, str | None]


def group_status(group_id: str | None, *, allow_empty: bool, active: bool,
                 loading: bool) -> int | None:
    """Kafka's validateGroupStatus; OffsetCommit/Fetch, Describe/DeleteGroups allow "".

    Group ids longer than ``MAX_GROUP_ID_LENGTH`` get INVALID_GROUP_ID. Kafka has no such
    limit (its only limit is the size of the internal record); a bound keeps every key of
    the internal topic small and makes a garbage id fail early, with a clear error.
    """
    if group_id is None or (not group_id and not allow_empty):
        return ErrorCode.INVALID_GROUP_ID
    if len(group_id) > MAX_GROUP_ID_LENGTH:
        return ErrorCode.INVALID_GROUP_ID
    if not active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if loading:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return None


def random_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class MembershipSettings:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> MembershipSettings:
        return cls(config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"],
                   config["group.initial.rebalance.delay.ms"], config["group.max.size"])


# -- group records that come back once durable ---------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupWritten:
    """A GroupMetadataValue append; ``value`` is remembered as persisted once durable."""

    group_id: str
    incarnation: int
    value: bytes


@dataclass(frozen=True, slots=True)
class EmptyGenerationWritten(GroupWritten):
    pass


@dataclass(frozen=True, slots=True)
class AssignmentWritten(GroupWritten):
    generation: int
    assignment: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class StaticMemberWritten(GroupWritten):
    """A static member rejoined under a new member id without a rebalance."""

    generation: int
    request: RequestId
    instance_id: str
    old_id: str
    new_id: str
    old_protocols: list[tuple[str, bytes]]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    support_skip_assignment: bool
    leader_before: str | None


class Membership(DecisionMaker):
    """Every group's members, generations and rebalance timers (one node coordinates all).

    ``groups`` is shared with the offsets bookkeeping (``offsets.py``), which keeps the
    committed offsets of the same Group objects.
    """

    def __init__(self, settings: MembershipSettings | None = None, *,
                 new_member_id: Callable[[str], str] = random_member_id) -> None:
        super().__init__()
        self.settings = settings or MembershipSettings()
        self.groups: dict[str, Group] = {}
        self._new_member_id = new_member_id
        self._incarnations = 0

    # -- plumbing --------------------------------------------------------------------------

    def _reply(self, request: RequestId, result: Any) -> None:
        self._out.append(Reply(request, result))

    def _arm(self, key: TimerKey, delay_ms: int) -> None:
        self._out.append(ArmTimer(key, delay_ms))

    def _cancel(self, key: TimerKey | None) -> None:
        if key is not None:
            self._out.append(CancelTimer(key))

    def new_group(self, group_id: str, now_ms: int, state: GroupState = EMPTY) -> Group:
        """A group that is not registered yet (the caller registers it)."""
        self._incarnations += 1
        return Group(group_id, now_ms, state, self._incarnations)

    def _create(self, group_id: str) -> Group:
        group = self.groups[group_id] = self.new_group(group_id, self._now)
        return group

    def _live(self, group_id: str, incarnation: int) -> Group | None:
        group = self.groups.get(group_id)
        return group if group is not None and group.incarnation == incarnation else None

    def _answer_join(self, group: Group, member: Member, result: JoinResult) -> None:
        request = group.take_join(member)
        if request is not None:
            self._reply(request, result)

    def _answer_sync(self, group: Group, member: Member, result: SyncResult) -> bool:
        request = group.take_sync(member)
        if request is None:
            return False
        self._reply(request, result)
        return True

    @staticmethod
    def _validate_current_member(group: Group, member_id: str,
                                 instance_id: str | None) -> int | None:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: member %s of instance %s is fenced by %s", group.group_id,
                         member_id, instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _validate_member_of_generation(self, group: Group, member_id: str,
                                       instance_id: str | None,
                                       generation_id: int) -> int | None:
        """The checks SyncGroup, Heartbeat and a member's OffsetCommit share."""
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(self, now_ms: int, request: RequestId, *, group_id: str, member_id: str,
                   group_instance_id: str | None, require_known_member_id: bool,
                   support_skip_assignment: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None) -> list[Decision]:
        """A JoinGroup whose group id passed ``group_status``; answers ``request`` now or
        parks it until the rebalance completes."""
        self._begin(now_ms)
        settings = self.settings
        if not (settings.min_session_timeout_ms <= session_timeout_ms
                <= settings.max_session_timeout_ms):
            self._reply(request, JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return self._done()
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                self._reply(request, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return self._done()
            group = self._create(group_id)
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._answer_join(group, member, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
            self._remove_member(group, member_id)
            self._reply(request, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, request, group_instance_id, require_known_member_id,
                                  support_skip_assignment, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                  protocols, reason)
        else:
            self._current_member_join(group, request, member_id, group_instance_id, client_id,
                                      client_host, rebalance_timeout_ms, session_timeout_ms,
                                      protocol_type, protocols, reason)
        if group.is_(PREPARING):
            self._check_join(group)
        return self._done()

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        max_size = self.settings.max_group_size
        if group.state is PREPARING:
            member = group.members.get(member_id)
            return ((member is not None and member.is_awaiting_join)
                    or group.awaiting_join < max_size)
        return member_id in group.members or len(group.members) < max_size

    def _new_member_join(self, group: Group, request: RequestId, instance_id: str | None,
                         require_known: bool, support_skip: bool, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         reason: str | None) -> None:
        if group.is_(DEAD):
            self._reply(request, JoinResult("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            self._reply(request, JoinResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = self._new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                log.info("group %s: static member %s rejoins with an unknown member id; "
                         "%s replaces %s", group.group_id, instance_id, new_id, old_id)
                self._update_static_member_and_rebalance(
                    group, request, old_id, new_id, instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, support_skip, reason)
            else:
                self._add_member_and_rebalance(group, request, new_id, instance_id, client_id,
                                               client_host, rebalance_timeout_ms,
                                               session_timeout_ms, protocol_type, protocols,
                                               reason)
        elif require_known:
            # KIP-394: hand out the id first; the member joins for real with it.
            key = TimerKey(TimerKind.PENDING_MEMBER, group.group_id, new_id)
            group.pending_members[new_id] = key
            self._arm(key, session_timeout_ms)
            self._reply(request, JoinResult(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, request, new_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, reason)

    def _current_member_join(self, group: Group, request: RequestId, member_id: str,
                             instance_id: str | None, client_id: str, client_host: str,
                             rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             reason: str | None) -> None:
        if group.is_(DEAD):
            self._reply(request, JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            self._reply(request, JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            if instance_id is not None:  # pending ids are only handed to dynamic members
                self._reply(request, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            self._cancel(group.pending_members.pop(member_id))
            self._add_member_and_rebalance(group, request, member_id, None, client_id,
                                           client_host, rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, reason)
            return
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            self._reply(request, JoinResult(member_id, error))
            return
        member = group.members[member_id]
        why = f"member {member_id} rejoined ({reason or 'no reason given'})"
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, why, request)
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # it missed the JoinGroup response: repeat it
                self._reply(request, self._current_join_result(
                    group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, why, request)
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoins to rebalance on metadata changes the members cannot see
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, why, request)
            else:
                self._reply(request,
                            self._current_join_result(group, member_id, with_members=False))
        else:
            log.warning("group %s: member %s rejoins in state %s", group.group_id, member_id,
                        group.state.value)
            self._reply(request, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _current_join_result(group: Group, member_id: str, *, with_members: bool,
                             leader_id: str | None = None,
                             skip_assignment: bool = False) -> JoinResult:
        leader = group.leader_id if leader_id is None else leader_id
        return JoinResult(
            member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
            group.protocol_name, leader or "", skip_assignment,
            group.current_member_metadata() if with_members else [])

    def _add_member_and_rebalance(self, group: Group, request: RequestId, member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]],
                                  reason: str | None) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols, is_new=True)
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, request)
        # A new member cannot heartbeat yet; its JoinGroup times out instead, and a
        # client that gave up and retried does not leave a defunct member forever.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"new member {member_id} joined ({reason or 'no reason given'})")

    def _update_member(self, group: Group, member: Member, protocols: list[tuple[str, bytes]],
                       rebalance_timeout_ms: int, session_timeout_ms: int,
                       request: RequestId | None) -> None:
        replaced = group.update_member(member, protocols, rebalance_timeout_ms,
                                       session_timeout_ms, request)
        if replaced is not None:
            # A retried JoinGroup replaces one whose client gave up; never leave it hanging.
            self._reply(replaced, JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str,
                                     request: RequestId) -> None:
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            request)
        self._maybe_prepare_rebalance(group, reason)

    def _replace_static_member(self, group: Group, instance_id: str, old_id: str,
                               new_id: str) -> Member:
        member = group.members[old_id]
        self._answer_join(group, member, JoinResult(old_id, ErrorCode.FENCED_INSTANCE_ID))
        self._answer_sync(group, member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        group.replace_static_member(instance_id, old_id, new_id)
        return member

    def _update_static_member_and_rebalance(
            self, group: Group, request: RequestId, old_id: str, new_id: str, instance_id: str,
            protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
            session_timeout_ms: int, support_skip: bool, reason: str | None) -> None:
        current_leader = group.leader_id
        member = self._replace_static_member(group, instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old_protocols = member.protocols
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        self._update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            request)
        why = f"static member {instance_id} rejoined as {new_id} ({reason or 'no reason given'})"
        if group.is_(STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, why + " with a change of protocol")
                return
            # Same protocol: no rebalance, but the new member id must be persisted first.
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            self._store_group(group, assignment, lambda value: StaticMemberWritten(
                group.group_id, group.incarnation, value, group.generation_id, request,
                instance_id, old_id, new_id, old_protocols, old_rebalance, old_session,
                support_skip, current_leader))
        elif group.is_(COMPLETING):
            # The leader may already assign for the old member id: start over.
            self._prepare_rebalance(group, why)

    def _on_static_member_written(self, group: Group, written: StaticMemberWritten,
                                  error: int) -> None:
        member = group.members.get(written.new_id)
        if (group.generation_id != written.generation or member is None
                or member.join_request != written.request):
            return  # the group moved on meanwhile; the rebalance answers the member
        if error != ErrorCode.NONE:
            log.warning("group %s: cannot persist static member %s: %s", group.group_id,
                        written.instance_id, ErrorCode(error).name)
            group.take_join(member)
            self._update_member(group, member, written.old_protocols,
                                written.old_rebalance_timeout_ms,
                                written.old_session_timeout_ms, None)
            self._replace_static_member(group, written.instance_id, written.new_id,
                                        written.old_id)
            self._schedule_heartbeat(group, member)
            self._reply(written.request, JoinResult(
                "", error, group.generation_id, group.protocol_type, group.protocol_name,
                written.leader_before or ""))
        elif written.support_skip_assignment:
            # JoinGroup v9: the leader learns it leads but keeps the assignment.
            is_leader = group.is_leader(written.new_id)
            self._answer_join(group, member, self._current_join_result(
                group, written.new_id, with_members=is_leader, skip_assignment=is_leader))
        else:
            # Answer with the old leader id so a rejoined leader does not assign.
            self._answer_join(group, member, self._current_join_result(
                group, written.new_id, with_members=False,
                leader_id=written.leader_before or ""))

    # -- rebalance -------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        was_empty = group.is_(EMPTY)
        group.transition_to(PREPARING, self._now)
        log.info("group %s: preparing to rebalance from generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if was_empty:
            delay = self.settings.initial_rebalance_delay_ms
            self._schedule_join(group, delay, initial=True,
                                remaining_ms=max(group.rebalance_timeout_ms - delay, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms, initial=False)
            self._check_join(group)

    def _schedule_join(self, group: Group, delay_ms: int, *, initial: bool,
                       remaining_ms: int = 0) -> None:
        self._cancel(group.join_timer)
        group.join_is_initial = initial
        group.initial_remaining_ms = remaining_ms
        group.join_delay_ms = delay_ms
        group.join_timer = TimerKey(TimerKind.JOIN, group.group_id)
        self._arm(group.join_timer, delay_ms)

    def _on_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if not group.is_(PREPARING):
            return
        if group.join_is_initial and group.new_member_added and group.initial_remaining_ms:
            # group.initial.rebalance.delay.ms: more members are arriving, wait a bit more
            group.new_member_added = False
            delay = min(self.settings.initial_rebalance_delay_ms, group.initial_remaining_ms)
            self._schedule_join(group, delay, initial=True,
                                remaining_ms=max(group.initial_remaining_ms
                                                 - group.join_delay_ms, 0))
            return
        self._complete_join(group)

    def _check_join(self, group: Group) -> None:
        """Kafka's tryCompleteJoin: finish early once every member has rejoined."""
        if (group.is_(PREPARING) and group.join_timer is not None and not group.join_is_initial
                and group.has_all_members_joined()):
            self._cancel(group.join_timer)
            group.join_timer = None
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for member in [m for m in group.members.values()
                       if not m.is_awaiting_join and not m.is_static]:
            log.info("group %s: removing member %s, which did not rejoin in time",
                     group.group_id, member.member_id)
            self._remove_member(group, member.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s: no member rejoined; waiting for session timeouts to expire "
                      "the members", group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms, initial=False)
            return
        group.init_next_generation(self._now)
        if group.is_(EMPTY):
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._store_group(group, {}, lambda value: EmptyGenerationWritten(
                group.group_id, group.incarnation, value))
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            self._answer_join(group, member, self._current_join_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: Group) -> None:
        self._cancel(group.sync_timer)
        group.sync_timer = TimerKey(TimerKind.SYNC, group.group_id,
                                    generation=group.generation_id)
        self._arm(group.sync_timer, group.rebalance_timeout_ms)

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            self._cancel(group.sync_timer)
            group.sync_timer = None

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            self._cancel(group.sync_timer)
            group.sync_timer = None

    def _on_sync_expired(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                self._remove_member(group, member_id)
            self._prepare_rebalance(group, f"members {missing} sent no SyncGroup in time")

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if self._answer_sync(group, member, result):
                # its session was not checked while it waited: restart the clock
                self._schedule_heartbeat(group, member)

    # -- member timers ---------------------------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member,
                            timeout_ms: int | None = None) -> None:
        self._cancel(member.heartbeat_timer)
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id)
        self._arm(member.heartbeat_timer, timeout)

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.is_(DEAD):
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # waiting in a rebalance counts as alive; re-armed when answered
        log.info("group %s: member %s failed (no heartbeat within %d ms); removing it",
                 group.group_id, member.member_id,
                 NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, "session timeout")

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is None:
            return
        log.info("group %s: pending member %s never joined; forgetting it", group.group_id,
                 member_id)
        if group.is_(PREPARING):
            self._check_join(group)

    def _remove_member(self, group: Group, member_id: str) -> Member | None:
        """Forget a member and its timers (a pending one too); a parked JoinGroup or
        SyncGroup of it hears UNKNOWN_MEMBER_ID."""
        self._cancel(group.pending_members.get(member_id))
        member = group.members.get(member_id)
        if member is not None:
            self._answer_join(group, member, JoinResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)
        if member is not None:
            self._cancel(member.heartbeat_timer)
            member.heartbeat_timer = None
            self._answer_sync(group, member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        return member

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A member waiting in JoinGroup is answered so that a live client rejoins.
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} left: {reason}")
        elif group.is_(PREPARING):
            self._check_join(group)

    def _cancel_group_timers(self, group: Group) -> None:
        for key in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            self._cancel(key)
        group.join_timer = group.sync_timer = None
        for member in group.members.values():
            self._cancel(member.heartbeat_timer)
            member.heartbeat_timer = None

    def on_timer(self, now_ms: int, key: TimerKey) -> list[Decision]:
        """A timer this machine armed has fired (and was not re-armed or cancelled)."""
        self._begin(now_ms)
        group = self.groups.get(key.group_id)
        if group is None:
            return self._done()
        if key.kind is TimerKind.HEARTBEAT:
            member = group.members.get(key.member_id)
            if member is not None and member.heartbeat_timer == key:
                self._on_heartbeat_expired(group, member)
        elif (key.kind is TimerKind.PENDING_MEMBER
              and group.pending_members.get(key.member_id) == key):
            self._on_pending_member_expired(group, key.member_id)
        elif key.kind is TimerKind.JOIN and group.join_timer == key:
            self._on_join_timer(group)
        elif key.kind is TimerKind.SYNC and group.sync_timer == key:
            self._on_sync_expired(group, key.generation)
        return self._done()

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(self, now_ms: int, request: RequestId, *, group_id: str, generation_id: int,
                   member_id: str, group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]) -> list[Decision]:
        self._begin(now_ms)
        group = self.groups.get(group_id)
        error = (ErrorCode.UNKNOWN_MEMBER_ID if group is None else self._validate_sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name))
        if error is not None or group is None:
            self._reply(request, SyncResult(error or ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(EMPTY):
            self._reply(request, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(PREPARING):
            self._reply(request, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(COMPLETING):
            member = group.members[member_id]
            self._answer_sync(group, member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_request = request
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._on_leader_sync(group, member_id, assignments)
        else:  # STABLE
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            self._reply(request, SyncResult(ErrorCode.NONE, group.protocol_type,
                                            group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member)
        return self._done()

    def _validate_sync(self, group: Group, generation_id: int, member_id: str,
                       instance_id: str | None, protocol_type: str | None,
                       protocol_name: str | None) -> int | None:
        error = self._validate_member_of_generation(group, member_id, instance_id,
                                                    generation_id)
        if error is not None:
            return error
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _on_leader_sync(self, group: Group, leader_id: str,
                        assignments: dict[str, bytes]) -> None:
        log.info("group %s: assignment from leader %s for generation %d (%d members)",
                 group.group_id, leader_id, group.generation_id, len(group.members))
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning("group %s: empty assignment for members %s of generation %d",
                        group.group_id, missing, group.generation_id)
        assignment = {m: assignments.get(m, b"") for m in group.members}
        self._store_group(group, assignment, lambda value: AssignmentWritten(
            group.group_id, group.incarnation, value, group.generation_id, assignment))

    def _on_assignment_written(self, group: Group, written: AssignmentWritten,
                               error: int) -> None:
        if not group.is_(COMPLETING) or group.generation_id != written.generation:
            return  # someone joined or left meanwhile; that rebalance answers everyone
        if error != ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"cannot persist the assignment: {error}")
        else:
            self._set_and_propagate_assignment(group, written.assignment)
            group.transition_to(STABLE, self._now)

    # -- Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, now_ms: int, *, group_id: str, member_id: str,
                  group_instance_id: str | None,
                  generation_id: int) -> tuple[int, list[Decision]]:
        self._begin(now_ms)
        return self._heartbeat(group_id, member_id, group_instance_id, generation_id), self._done()

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                   generation_id: int) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._validate_member_of_generation(group, member_id, instance_id,
                                                    generation_id)
        if error is not None:
            return error
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, now_ms: int, group_id: str, leaving: list[LeavingMember]
                    ) -> tuple[int, list[tuple[str, str | None, int]], list[Decision]]:
        """(group error, [(member id, instance id, error)], decisions)."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None:
            return (ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i, _ in leaving],
                    self._done())
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], self._done()
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id, reason in leaving:
            why = f"LeaveGroup ({reason or 'no reason given'})"
            if member_id == "":
                # administrative removal of a static member by group.instance.id
                current = group.static_members.get(instance_id) if instance_id else None
                if current is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._leave(group, group.members[current], why)
                results.append((member_id, instance_id, ErrorCode.NONE))
            elif member_id in group.pending_members:
                self._remove_member(group, member_id)
                if group.is_(PREPARING):
                    self._check_join(group)
                results.append((member_id, instance_id, ErrorCode.NONE))
            else:
                error = self._validate_current_member(group, member_id, instance_id)
                if error is None:
                    self._leave(group, group.members[member_id], why)
                results.append((member_id, instance_id,
                                ErrorCode.NONE if error is None else error))
        return ErrorCode.NONE, results, self._done()

    def _leave(self, group: Group, member: Member, reason: str) -> None:
        log.info("group %s: member %s left (%s)", group.group_id, member.member_id, reason)
        self._remove_member_and_update_group(group, member, reason)

    # -- OffsetCommit (validation only: offsets.py stores them) ----------------------------

    def accept_commit(self, now_ms: int, *, group_id: str, member_id: str,
                      group_instance_id: str | None, generation_id: int,
                      why: str = "created by an offset commit outside group management"
                      ) -> tuple[int | None, Group | None, list[Decision]]:
        """(error, group to commit for, decisions): Kafka's checks before storeOffsets.

        An unknown group is created for a commit outside group management (``why`` says
        what happened, for the log: the offsets of a consumer-protocol group or of a
        transaction live in a classic group entry too); a member's commit counts as a
        heartbeat."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a member of a forgotten generation
                return ErrorCode.ILLEGAL_GENERATION, None, self._done()
            log.info("group %s: %s", group_id, why)
            group = self._create(group_id)
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and group.is_(COMPLETING):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return error, None, self._done()
        if group.state in (STABLE, PREPARING):
            # commits still count in PreparingRebalance; the heartbeat says "rejoin"
            self._schedule_heartbeat(group, group.members[member_id])
        return None, group, self._done()

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str,
                                instance_id: str | None) -> int | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return None  # admin client or a consumer that manages its own partitions
        if generation_id >= 0 or member_id or instance_id is not None:
            return self._validate_member_of_generation(group, member_id, instance_id,
                                                       generation_id)
        if not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a live group
        return None

    # -- group records ---------------------------------------------------------------------

    def _store_group(self, group: Group, assignment: dict[str, bytes],
                     then: Callable[[bytes], GroupWritten]) -> None:
        """Append the group's GroupMetadataValue; ``then(value)`` comes back when durable."""
        protocol = group.protocol_name
        value = rec.group_value(rec.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[rec.MemberValue(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b"")) for m in group.members.values()],
        ))
        self._out.append(Append(group.group_id, ((rec.group_key(group.group_id), value),),
                                then(value)))

    def on_group_written(self, now_ms: int, written: GroupWritten, error: int) -> list[Decision]:
        """A group record appended by ``_store_group`` is durable (NONE) or failed."""
        self._begin(now_ms)
        group = self._live(written.group_id, written.incarnation)
        if group is None:
            return self._done()  # deleted meanwhile
        if error == ErrorCode.NONE:
            group.persisted_value = written.value
        elif error == ErrorCode.INVALID_COMMIT_OFFSET_SIZE:
            error = ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka's mapping for group records
        if isinstance(written, AssignmentWritten):
            self._on_assignment_written(group, written, error)
        elif isinstance(written, StaticMemberWritten):
            self._on_static_member_written(group, written, error)
        elif error != ErrorCode.NONE:
            log.warning("group %s: cannot persist the empty generation: %s", group.group_id,
                        ErrorCode(error).name)
        return self._done()

    # -- registry: restore, forget, shutdown, queries --------------------------------------

    def adopt(self, now_ms: int, group: Group) -> list[Decision]:
        """Register a group restored from the log; its members must show up again in time."""
        self._begin(now_ms)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        return self._done()

    def forget(self, group: Group) -> list[Decision]:
        """Drop a Dead group and its timers (Kafka's removeGroup)."""
        self._out = []
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
            self._cancel_group_timers(group)
        return self._done()

    def unload(self, group_ids: Iterable[str]) -> list[Decision]:
        """Give up these groups (their ``__consumer_offsets`` partition is led elsewhere
        now, Kafka's removeGroupsForPartition): timers cancelled, parked requests answered
        NOT_COORDINATOR so that clients find the new coordinator."""
        self._out = []
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            self._cancel_group_timers(group)
            for member in group.members.values():
                self._answer_join(group, member,
                                  JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                self._answer_sync(group, member, SyncResult(ErrorCode.NOT_COORDINATOR))
        return self._done()

    def shutdown(self) -> list[Decision]:
        """Cancel every timer and answer every parked request with NOT_COORDINATOR."""
        self._out = []
        for group in self.groups.values():
            self._cancel_group_timers(group)
            for member in group.members.values():
                self._answer_join(group, member,
                                  JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                self._answer_sync(group, member, SyncResult(ErrorCode.NOT_COORDINATOR))
        return self._done()

    def list_groups(self, states: Iterable[str]) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every live group, filtered by state name."""
        wanted = {s.lower() for s in states}
        return [(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if not g.is_(DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def describe(self, group_id: str) -> Group | None:
        """The group, or None for one we do not know (described as Dead, as in Kafka)."""
        group = self.groups.get(group_id)
        return None if group is None or group.is_(DEAD) else group
