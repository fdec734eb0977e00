"""The classic group coordinator: membership, rebalances, timers and committed offsets.

This follows Apache Kafka's GroupCoordinator (3.x, classic protocol) decision by decision,
so clients see the same states, generations and error codes; where this file says
"Kafka" it means that code. Differences that come from being one asyncio process:

- Kafka's purgatories become ``loop.call_later`` handles: one heartbeat timer per member
  (session timeout; five minutes for a new member still waiting in JoinGroup), one join
  timer per group (initial delay for an empty group, else the rebalance timeout), one
  sync timer per generation (members that never send SyncGroup are dropped). Nothing
  polls: every timer is re-armed or cancelled by the event that satisfies it.
- A parked JoinGroup/SyncGroup is an asyncio future the handler awaits. A client that
  disconnects cancels it; the member stays until its timers say otherwise, as in Kafka
  (which cannot see disconnects of muted sockets either).
- Writes to ``__consumer_offsets`` are appends with the broker's durability setting;
  the group only moves on (assignment handed out, offsets visible, response sent) when
  the append is as durable as that setting promises.
- Group ids longer than ``MAX_GROUP_ID_LENGTH`` get INVALID_GROUP_ID. Kafka has no such
  limit (its only limit is the size of the internal record); a bound keeps every key of
  the internal topic small and makes a garbage id fail early, with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkaproto import ErrorCode
from logserver.groups import records as rec
from logserver.groups.group import (
    CommittedOffset,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    resolve_future,
)
from logserver.groups.store import OFFSETS_TOPIC, AppendOutcome, OffsetsStore

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

MAX_GROUP_ID_LENGTH = 255
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's NewMemberJoinTimeoutMs
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE, GroupState.DEAD)

TopicPartition = tuple[str, int]
# (member_id, group_instance_id, reason) of one LeaveGroup member
LeavingMember = tuple[str, str | None, str | None]


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Every group of this node (a single node coordinates all of them)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.min_session_timeout_ms: int = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms: int = config["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms: int = config["group.initial.rebalance.delay.ms"]
        self.max_group_size: int = config["group.max.size"]
        self.retention_ms: int = config["offsets.retention.minutes"] * 60_000
        self.retention_check_ms: int = config["offsets.retention.check.interval.ms"]
        self.metadata_max_bytes: int = config["offset.metadata.max.bytes"]
        self.store = OffsetsStore(broker)
        self.groups: dict[str, Group] = {}
        self.active = False
        self._closed = False
        self.loading = True
        self.now_ms: Callable[[], int] = _now_ms  # tests may substitute a clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._cleanup_timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin replaying ``__consumer_offsets``; group APIs answer "loading" meanwhile."""
        self._loop = asyncio.get_running_loop()
        self.active = True
        self.loading = True
        self._load_task = self._loop.create_task(self._load())

    async def close(self) -> None:
        """Answer every parked JoinGroup/SyncGroup at once; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.active = False
        task = self._load_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._cleanup_timer is not None:
            self._cleanup_timer.cancel()
        for group in self.groups.values():
            self._cancel_group_timers(group)
            for member in group.members.values():
                group.invoke_join(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                group.invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
        log.info("group coordinator stopped (%d groups)", len(self.groups))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _future(self) -> asyncio.Future[Any]:
        return self.loop.create_future()

    # -- validation -----------------------------------------------------------------------

    def _group_status(self, group_id: str | None, *, allow_empty: bool) -> int | None:
        """Kafka's validateGroupStatus; OffsetCommit/Fetch, Describe/DeleteGroups allow ""."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if len(group_id) > MAX_GROUP_ID_LENGTH:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

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

    # -- FindCoordinator ------------------------------------------------------------------

    async def find_coordinator(self, key_type: int) -> tuple[int, str | None]:
        """(error, message) for one key; NONE means "this node". The first lookup waits
        for ``__consumer_offsets`` to be created (on the storage worker)."""
        if key_type == TRANSACTION_KEY_TYPE:
            return (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "transactions are not supported by this server")
        if key_type != GROUP_KEY_TYPE:
            return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running"
        if self.loading:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"loading {OFFSETS_TOPIC}"
        error = await self.store.ensure_topic()
        if error is not None:
            return error, f"cannot create {OFFSETS_TOPIC}"
        return ErrorCode.NONE, None

    async def ensure_offsets_topic(self) -> int | None:
        """Create ``__consumer_offsets`` if missing (Metadata auto-creation); an error
        code when it cannot be created."""
        return await self.store.ensure_topic()

    # -- JoinGroup ------------------------------------------------------------------------

    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, support_skip_assignment: bool,
                   client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None
                   ) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = self._future()
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            future.set_result(JoinResult(member_id, error))
            return future
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            future.set_result(JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return future
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                future.set_result(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return future
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                group.invoke_join(member, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
            self._remove_member(group, member_id)
            future.set_result(JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, group_instance_id, require_known_member_id,
                                  support_skip_assignment, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                  protocols, future, reason)
        else:
            self._current_member_join(group, member_id, group_instance_id, client_id,
                                      client_host, rebalance_timeout_ms, session_timeout_ms,
                                      protocol_type, protocols, future, reason)
        if group.is_(PREPARING):
            self._check_join(group)
        return future

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING:
            member = group.members.get(member_id)
            return ((member is not None and member.is_awaiting_join)
                    or group.awaiting_join < self.max_group_size)
        return member_id in group.members or len(group.members) < self.max_group_size

    def _new_member_join(self, group: Group, instance_id: str | None, require_known: bool,
                         support_skip: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], future: asyncio.Future[JoinResult],
                         reason: str | None) -> None:
        if group.is_(DEAD):
            future.set_result(JoinResult("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            future.set_result(JoinResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                log.info("group %s: static member %s rejoins with an unknown member id; "
                         "%s replaces %s", group.group_id, instance_id, new_id, old_id)
                self._update_static_member_and_rebalance(
                    group, old_id, new_id, instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, future, support_skip, reason)
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms,
                                               protocol_type, protocols, future, reason)
        elif require_known:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members[new_id] = self.loop.call_later(
                session_timeout_ms / 1000, self._on_pending_member_expired, group, new_id)
            future.set_result(JoinResult(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, future, reason)

    def _current_member_join(self, group: Group, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]],
                             future: asyncio.Future[JoinResult], reason: str | None) -> None:
        if group.is_(DEAD):
            future.set_result(JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            future.set_result(JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            if instance_id is not None:  # pending ids are only handed to dynamic members
                future.set_result(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, future, reason)
            return
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            future.set_result(JoinResult(member_id, error))
            return
        member = group.members[member_id]
        why = f"member {member_id} rejoined ({reason or 'no reason given'})"
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, why, future)
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # it missed the JoinGroup response: repeat it
                future.set_result(self._current_join_result(
                    group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, why, future)
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoins to rebalance on metadata changes the members cannot see
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, why, future)
            else:
                future.set_result(self._current_join_result(group, member_id, with_members=False))
        else:
            log.warning("group %s: member %s rejoins in state %s", group.group_id, member_id,
                        group.state.value)
            future.set_result(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _current_join_result(group: Group, member_id: str, *, with_members: bool,
                             leader_id: str | None = None,
                             skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
            group.protocol_name, group.leader_id if leader_id is None else leader_id,
            skip_assignment, group.current_member_metadata() if with_members else [])

    def _add_member_and_rebalance(self, group: Group, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]],
                                  future: asyncio.Future[JoinResult], reason: str | None) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols, is_new=True)
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        # A new member cannot heartbeat yet; its JoinGroup times out instead, and a
        # client that gave up and retried does not leave a defunct member forever.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"new member {member_id} joined ({reason or 'no reason given'})")

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str,
                                     future: asyncio.Future[JoinResult]) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
            self, group: Group, old_id: str, new_id: str, instance_id: str,
            protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
            session_timeout_ms: int, future: asyncio.Future[JoinResult], support_skip: bool,
            reason: str | None) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old_protocols = member.protocols
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        why = f"static member {instance_id} rejoined as {new_id} ({reason or 'no reason given'})"
        if group.is_(STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, why + " with a change of protocol")
                return
            # Same protocol: no rebalance, but the new member id must be persisted first.
            generation = group.generation_id
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(error: int) -> None:
                if group.generation_id != generation or member.join_future is not future:
                    return  # the group moved on meanwhile; the rebalance answers the member
                if error != ErrorCode.NONE:
                    log.warning("group %s: cannot persist static member %s: %s", group.group_id,
                                instance_id, ErrorCode(error).name)
                    member.join_future = None
                    group.awaiting_join -= 1
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    group.replace_static_member(instance_id, new_id, old_id)
                    self._schedule_heartbeat(group, member)
                    resolve_future(future, JoinResult("", error, group.generation_id,
                                                group.protocol_type, group.protocol_name,
                                                current_leader or ""))
                elif support_skip:
                    # JoinGroup v9: the leader learns it leads but keeps the assignment.
                    is_leader = group.is_leader(new_id)
                    group.invoke_join(member, self._current_join_result(
                        group, new_id, with_members=is_leader, skip_assignment=is_leader))
                else:
                    # Answer with the old leader id so a rejoined leader does not assign.
                    group.invoke_join(member, self._current_join_result(
                        group, new_id, with_members=False, leader_id=current_leader or ""))

            self._when_durable(self._store_group(group, assignment), stored, group_write=True)
        elif group.is_(COMPLETING):
            # The leader may already assign for the old member id: start over.
            self._prepare_rebalance(group, why)

    # -- rebalance ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        was_empty = group.is_(EMPTY)
        group.transition_to(PREPARING, self.now_ms())
        log.info("group %s: preparing to rebalance from generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if was_empty:
            delay = self.initial_rebalance_delay_ms
            self._schedule_join(group, delay, initial=True,
                                remaining_ms=max(group.rebalance_timeout_ms - delay, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms, initial=False)
            self._check_join(group)

    def _schedule_join(self, group: Group, delay_ms: int, *, initial: bool,
                       remaining_ms: int = 0) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_is_initial = initial
        group.initial_remaining_ms = remaining_ms
        group.join_timer = self.loop.call_later(delay_ms / 1000, self._on_join_timer, group,
                                                delay_ms)

    def _on_join_timer(self, group: Group, delay_ms: int) -> None:
        group.join_timer = None
        if not group.is_(PREPARING):
            return
        if group.join_is_initial and group.new_member_added and group.initial_remaining_ms:
            # group.initial.rebalance.delay.ms: more members are arriving, wait a bit more
            group.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, group.initial_remaining_ms)
            self._schedule_join(group, delay, initial=True,
                                remaining_ms=max(group.initial_remaining_ms - delay_ms, 0))
            return
        self._complete_join(group)

    def _check_join(self, group: Group) -> None:
        """Kafka's tryCompleteJoin: finish early once every member has rejoined."""
        if (group.is_(PREPARING) and group.join_timer is not None and not group.join_is_initial
                and group.has_all_members_joined()):
            group.join_timer.cancel()
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
        group.init_next_generation(self.now_ms())
        if group.is_(EMPTY):
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)

            def stored(error: int) -> None:
                if error != ErrorCode.NONE:
                    log.warning("group %s: cannot persist the empty generation: %s",
                                group.group_id, ErrorCode(error).name)

            self._when_durable(self._store_group(group, {}), stored, group_write=True)
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            group.invoke_join(member, self._current_join_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        group.sync_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000,
                                                self._on_sync_expired, group, group.generation_id)

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
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
            if group.invoke_sync(member, result):
                # its session was not checked while it waited: restart the clock
                self._schedule_heartbeat(group, member)

    # -- member timers --------------------------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member,
                            timeout_ms: int | None = None) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.loop.call_later(timeout / 1000, self._on_heartbeat_expired,
                                                      group, member)

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.is_(DEAD) or group.members.get(member.member_id) is not member:
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
        """Forget a member and its timers (a pending one too); answers nothing else."""
        timer = group.pending_members.get(member_id)
        if timer is not None:
            timer.cancel()
        member = group.remove(member_id)
        if member is not None:
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
                member.heartbeat_timer = None
            group.invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        return member

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A member waiting in JoinGroup is answered so that a live client rejoins.
        group.invoke_join(member, JoinResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} left: {reason}")
        elif group.is_(PREPARING):
            self._check_join(group)

    def _cancel_group_timers(self, group: Group) -> None:
        for timer in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if timer is not None:
                timer.cancel()
        group.join_timer = group.sync_timer = None
        for member in group.members.values():
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
                member.heartbeat_timer = None

    # -- SyncGroup ------------------------------------------------------------------------

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]
                   ) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = self._future()
        error = self._group_status(group_id, allow_empty=False)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the restart: rejoin (older clients do not
            # know COORDINATOR_LOAD_IN_PROGRESS here).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self.groups.get(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is None and group is not None:
            error = self._validate_sync(group, generation_id, member_id, group_instance_id,
                                        protocol_type, protocol_name)
        if error is not None or group is None:
            future.set_result(SyncResult(error or ErrorCode.UNKNOWN_MEMBER_ID))
            return future
        if group.is_(EMPTY):
            future.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(PREPARING):
            future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(COMPLETING):
            member = group.members[member_id]
            if member.sync_future is not None:
                resolve_future(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_future = future
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._on_leader_sync(group, member_id, assignments)
        else:  # STABLE
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            future.set_result(SyncResult(ErrorCode.NONE, group.protocol_type,
                                         group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member)
        return future

    def _validate_sync(self, group: Group, generation_id: int, member_id: str,
                       instance_id: str | None, protocol_type: str | None,
                       protocol_name: str | None) -> int | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
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
        generation = group.generation_id

        def stored(error: int) -> None:
            if not group.is_(COMPLETING) or group.generation_id != generation:
                return  # someone joined or left meanwhile; that rebalance answers everyone
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, f"cannot persist the assignment: {error}")
            else:
                self._set_and_propagate_assignment(group, assignment)
                group.transition_to(STABLE, self.now_ms())

        self._when_durable(self._store_group(group, assignment), stored, group_write=True)

    # -- Heartbeat, LeaveGroup ------------------------------------------------------------

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        error = self._group_status(group_id, allow_empty=False)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # as Kafka: the member learns of its fate after loading
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[LeavingMember]
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i, _ in leaving]
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
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
                results.append((member_id, instance_id, error or ErrorCode.NONE))
        return ErrorCode.NONE, results

    def _leave(self, group: Group, member: Member, reason: str) -> None:
        log.info("group %s: member %s left (%s)", group.group_id, member.member_id, reason)
        self._remove_member_and_update_group(group, member, reason)

    # -- persistence helpers --------------------------------------------------------------

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> AppendOutcome:
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
        outcome = self.store.append(group.group_id, [(rec.group_key(group.group_id), value)])
        if outcome.error == ErrorCode.NONE:

            def remember(error: int) -> None:
                if error == ErrorCode.NONE:
                    group.persisted_value = value

            self._when_durable(outcome, remember)
        return outcome

    def _when_durable(self, outcome: AppendOutcome, callback: Callable[[int], None], *,
                      group_write: bool = False) -> None:
        """Call ``callback(error)`` once the append is as durable as the setting asks."""
        error = outcome.error
        if group_write and error == ErrorCode.INVALID_COMMIT_OFFSET_SIZE:
            error = ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka's mapping for group records
        if outcome.wait is None or error != ErrorCode.NONE:
            callback(error)
            return

        def done(wait: asyncio.Future[None]) -> None:
            if wait.cancelled() or wait.exception() is not None:
                callback(ErrorCode.NOT_COORDINATOR)  # Kafka: KAFKA_STORAGE_ERROR -> this
            else:
                callback(ErrorCode.NONE)

        outcome.wait.add_done_callback(done)

    # -- OffsetCommit ---------------------------------------------------------------------

    def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: dict[TopicPartition, CommittedOffset]
                       ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Validate and persist; resolves to an error per partition once durable."""
        future: asyncio.Future[dict[TopicPartition, int]] = self._future()

        def fail(error: int) -> asyncio.Future[dict[TopicPartition, int]]:
            future.set_result(dict.fromkeys(offsets, error))
            return future

        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return fail(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return fail(ErrorCode.ILLEGAL_GENERATION)  # a member of a forgotten generation
            log.info("group %s: created by an offset commit outside group management", group_id)
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return fail(error)
        if group.is_(COMPLETING):
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            # commits still count in PreparingRebalance; the heartbeat says "rejoin"
            self._schedule_heartbeat(group, group.members[member_id])
        self._store_offsets(group, offsets, future)
        return future

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str,
                                instance_id: str | None) -> int | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return None  # admin client or a consumer that manages its own partitions
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a live group
        return None

    def _store_offsets(self, group: Group, offsets: dict[TopicPartition, CommittedOffset],
                       future: asyncio.Future[dict[TopicPartition, int]]) -> None:
        errors: dict[TopicPartition, int] = {}
        valid: list[tuple[TopicPartition, CommittedOffset]] = []
        for tp, committed in offsets.items():
            if len(committed.metadata.encode()) > self.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid.append((tp, committed))
        if not valid:
            future.set_result(errors)
            return
        records = [(rec.offset_key(group.group_id, topic, partition),
                    rec.offset_value(rec.OffsetValue(c.offset, c.leader_epoch, c.metadata,
                                                     c.commit_timestamp, c.expire_timestamp)))
                   for (topic, partition), c in valid]
        outcome = self.store.append(group.group_id, records)
        if outcome.error == ErrorCode.NONE:
            for tp, _ in valid:
                group.pending_commits[tp] += 1

        def stored(error: int) -> None:
            for index, (tp, committed) in enumerate(valid):
                errors[tp] = error
                if outcome.error != ErrorCode.NONE:
                    continue
                if group.pending_commits[tp] <= 0:
                    continue  # deleted (DeleteGroups/OffsetDelete) while being written
                group.pending_commits[tp] -= 1
                if group.pending_commits[tp] == 0:
                    del group.pending_commits[tp]
                if error == ErrorCode.NONE:
                    committed.log_offset = outcome.base_offset + index
                    current = group.offsets.get(tp)
                    if current is None or current.log_offset < committed.log_offset:
                        group.offsets[tp] = committed
            resolve_future(future, errors)

        self._when_durable(outcome, stored)

    # -- OffsetFetch ----------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool
                      ) -> tuple[int, list[tuple[str, int, int, int, str, int]]]:
        """(group error, [(topic, partition, offset, leader epoch, metadata, error)])."""
        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            if partitions is None:
                return ErrorCode.NONE, []
            return ErrorCode.NONE, [(t, p, -1, -1, "", ErrorCode.NONE) for t, p in partitions]
        if partitions is None:
            return ErrorCode.NONE, [
                (t, p, c.offset, c.leader_epoch, c.metadata, ErrorCode.NONE)
                for (t, p), c in sorted(group.offsets.items())]
        result = []
        for tp in partitions:
            if require_stable and group.pending_commits.get(tp):
                result.append((tp[0], tp[1], -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            c = group.offsets.get(tp)
            if c is None:
                result.append((tp[0], tp[1], -1, -1, "", ErrorCode.NONE))
            else:
                result.append((tp[0], tp[1], c.offset, c.leader_epoch, c.metadata,
                               ErrorCode.NONE))
        return ErrorCode.NONE, result

    # -- ListGroups, DescribeGroups -------------------------------------------------------

    def list_groups(self, states: Iterable[str]) -> tuple[int, list[tuple[str, str, str]]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        wanted = {s.lower() for s in states}
        return error, [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def describe_group(self, group_id: str) -> tuple[int, Group | None]:
        """(error, group); a group we do not know describes as Dead, as in Kafka."""
        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, None if group is None or group.is_(DEAD) else group

    # -- DeleteGroups, OffsetDelete, expiry -----------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> asyncio.Future[list[tuple[str, int]]]:
        future: asyncio.Future[list[tuple[str, int]]] = self._future()
        results: list[tuple[str, int]] = []
        waits: list[asyncio.Future[None]] = []
        for group_id in group_ids:
            error = self._group_status(group_id, allow_empty=True)
            group = self.groups.get(group_id) if error is None else None
            if error is None and (group is None or group.is_(DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif error is None and group is not None and not group.is_(EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            if error is not None or group is None:
                results.append((group_id, error or ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            group.transition_to(DEAD, self.now_ms())
            removed = list(group.offsets)
            group.offsets.clear()
            group.pending_commits.clear()
            outcome = self._cleanup_group(group, removed)
            log.info("group %s deleted with %d committed offsets", group_id, len(removed))
            results.append((group_id, ErrorCode.NONE))
            if outcome is not None and outcome.wait is not None:
                waits.append(outcome.wait)
        if not waits:
            future.set_result(results)
        else:
            gathered = asyncio.gather(*waits, return_exceptions=True)
            gathered.add_done_callback(lambda _: resolve_future(future, results))
        return future

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> asyncio.Future[tuple[int, dict[TopicPartition, int]]]:
        future: asyncio.Future[tuple[int, dict[TopicPartition, int]]] = self._future()
        error = self._group_status(group_id, allow_empty=False)
        group = self.groups.get(group_id) if error is None else None
        if error is None and (group is None or group.is_(DEAD)):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not None or group is None:
            future.set_result((error or ErrorCode.GROUP_ID_NOT_FOUND, {}))
            return future
        errors: dict[TopicPartition, int] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            errors.update((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                          for tp in partitions if group.is_subscribed_to(tp[0]))
        else:
            future.set_result((ErrorCode.NON_EMPTY_GROUP, {}))
            return future
        outcome = None
        if eligible:
            removed = []
            for tp in eligible:
                group.pending_commits.pop(tp, None)
                if group.offsets.pop(tp, None) is not None:
                    removed.append(tp)
                errors[tp] = ErrorCode.NONE
            outcome = self._cleanup_group(group, removed)
            log.info("group %s: deleted offsets of %s", group_id, sorted(eligible))
        if outcome is None or outcome.wait is None:
            future.set_result((ErrorCode.NONE, errors))
        else:
            outcome.wait.add_done_callback(lambda _: resolve_future(future, (ErrorCode.NONE, errors)))
        return future

    def _cleanup_group(self, group: Group, removed: list[TopicPartition]) -> AppendOutcome | None:
        """Kafka's cleanupGroupMetadata: tombstones for removed offsets, and for the group
        itself once it is empty and holds no offsets (then it is forgotten)."""
        if group.is_(EMPTY) and not group.has_offsets() and not group.pending_members:
            log.info("group %s: empty and without offsets; now Dead", group.group_id)
            group.transition_to(DEAD, self.now_ms())
        tombstones: list[tuple[bytes, bytes | None]] = [
            (rec.offset_key(group.group_id, t, p), None) for t, p in removed]
        if group.is_(DEAD) and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
            self._cancel_group_timers(group)
            if group.generation_id > 0 or group.persisted_value is not None:
                tombstones.append((rec.group_key(group.group_id), None))
        if not tombstones:
            return None
        outcome = self.store.append(group.group_id, tombstones)
        if outcome.error != ErrorCode.NONE:
            log.warning("group %s: cannot write %d tombstones: %s", group.group_id,
                        len(tombstones), ErrorCode(outcome.error).name)
            return None
        return outcome

    async def on_topic_deleted(self, topic: str) -> int:
        """Kafka's handleDeletedPartitions: a deleted topic's committed offsets go too, so
        a topic created again under the same name does not resume from stale offsets."""
        if topic == OFFSETS_TOPIC:
            log.warning("%s was deleted; writing the live groups and offsets to a new one",
                        OFFSETS_TOPIC)
            self.loading = True  # no group writes between the snapshot and its append
            try:
                if await self.store.ensure_topic() is None:
                    await self.rewrite()
            finally:
                self.loading = False
            return 0
        removed_total = 0
        for group in list(self.groups.values()):
            removed = [tp for tp in group.offsets if tp[0] == topic]
            for tp in removed:
                del group.offsets[tp]
            for tp in [tp for tp in group.pending_commits if tp[0] == topic]:
                del group.pending_commits[tp]
            if removed:
                self._cleanup_group(group, removed)
                removed_total += len(removed)
        if removed_total:
            log.info("removed %d committed offsets of deleted topic %s", removed_total, topic)
        return removed_total

    def expire_offsets(self) -> int:
        """Kafka's offset expiry (offsets.retention.minutes); returns offsets removed."""
        now = self.now_ms()
        removed_total = 0
        for group in list(self.groups.values()):
            removed = self._expired_offsets(group, now)
            for tp in removed:
                del group.offsets[tp]
            self._cleanup_group(group, removed)
            removed_total += len(removed)
        if removed_total:
            log.info("expired %d committed offsets", removed_total)
        return removed_total

    def _expired_offsets(self, group: Group, now: int) -> list[TopicPartition]:
        retention = self.retention_ms

        def expired(base: Callable[[CommittedOffset], int],
                    keep_topics: set[str] | None = None) -> list[TopicPartition]:
            out = []
            for tp, c in group.offsets.items():
                if (keep_topics and tp[0] in keep_topics) or group.pending_commits.get(tp):
                    continue
                if c.expire_timestamp >= 0:  # OffsetCommit v2-4 asked for its own retention
                    if now >= c.expire_timestamp:
                        out.append(tp)
                elif now - base(c) >= retention:
                    out.append(tp)
            return out

        if group.protocol_type is not None and group.is_(EMPTY):
            # retention counts from when the group became empty
            return expired(lambda c: group.state_timestamp if group.state_timestamp >= 0
                           else c.commit_timestamp)
        if (group.is_consumer_group and group.subscribed_topics is not None
                and group.is_(STABLE)):
            return expired(lambda c: c.commit_timestamp, group.subscribed_topics)
        if group.protocol_type is None:
            return expired(lambda c: c.commit_timestamp)  # offsets-only (simple) group
        return []

    def _schedule_cleanup(self) -> None:
        self._cleanup_timer = self.loop.call_later(self.retention_check_ms / 1000,
                                                   self._on_cleanup_timer)

    def _on_cleanup_timer(self) -> None:
        self._cleanup_timer = None
        if not self.active:
            return
        try:
            self.expire_offsets()
        except Exception:  # a bug here must not stop future cleanups
            log.exception("offset expiry failed")
        self._schedule_cleanup()

    # -- load and rewrite -----------------------------------------------------------------

    async def _load(self) -> None:
        started = time.monotonic()
        total = 0
        try:
            if self.store.exists():
                total = await self._replay()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("replaying %s failed; serving the groups loaded so far",
                          OFFSETS_TOPIC)
        offsets = sum(len(g.offsets) for g in self.groups.values())
        log.info("loaded %d groups and %d committed offsets from %d records of %s in %.3f s",
                 len(self.groups), offsets, total, OFFSETS_TOPIC, time.monotonic() - started)
        if self.store.should_rewrite(total, self.live_records()):
            try:
                await self.rewrite()
            except Exception:  # the old segments are still there: nothing is lost
                log.exception("rewriting %s failed", OFFSETS_TOPIC)
        self.loading = False
        self._schedule_cleanup()

    async def _replay(self) -> int:
        """Last value per key wins; a null value deletes. Yields to the loop now and then."""
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        groups: dict[str, tuple[rec.GroupValue, bytes]] = {}
        total = 0
        for partition in range(self.store.partitions):
            for entry in self.store.iter_log(partition):
                total += 1
                if total % 5000 == 0:
                    await asyncio.sleep(0)
                if entry.key is None:
                    continue
                try:
                    key = rec.parse_key(entry.key)
                    if isinstance(key, rec.OffsetKey):
                        tp = (key.topic, key.partition)
                        if entry.value is None:
                            offsets.get(key.group, {}).pop(tp, None)
                        else:
                            v = rec.parse_offset_value(entry.value)
                            offsets.setdefault(key.group, {})[tp] = CommittedOffset(
                                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                v.expire_timestamp, entry.offset)
                    elif isinstance(key, rec.GroupKey):
                        if entry.value is None:
                            groups.pop(key.group, None)
                        else:
                            groups[key.group] = (rec.parse_group_value(entry.value), entry.value)
                except rec.RecordFormatError as exc:
                    log.warning("%s-%d offset %d: skipping unreadable record: %s",
                                OFFSETS_TOPIC, partition, entry.offset, exc)
        now = self.now_ms()
        for group_id in groups.keys() | {g for g, committed in offsets.items() if committed}:
            loaded = groups.get(group_id)
            group = self._restore_group(group_id, loaded, now)
            group.offsets = {tp: c for tp, c in offsets.get(group_id, {}).items()}
            self.groups[group_id] = group
        return total

    def _restore_group(self, group_id: str, loaded: tuple[rec.GroupValue, bytes] | None,
                       now: int) -> Group:
        if loaded is None:
            return Group(group_id, now)  # offsets only
        value, raw = loaded
        state = STABLE if value.members else EMPTY
        timestamp = value.current_state_timestamp
        group = Group(group_id, timestamp if timestamp >= 0 else now, state)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout, m.session_timeout, value.protocol_type,
                            protocols, assignment=m.assignment)
            group.add(member)
            self._schedule_heartbeat(group, member)  # members must show up again in time
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader if value.leader in group.members else (
            next(iter(group.members), None))
        group.subscribed_topics = group.compute_subscribed_topics()
        group.persisted_value = raw
        return group

    def live_records(self) -> int:
        return sum(len(g.offsets) + (g.persisted_value is not None)
                   for g in self.groups.values())

    async def rewrite(self) -> int:
        """Compact ``__consumer_offsets`` to its live records (see store.py); at start-up."""
        snapshot: dict[int, list[tuple[bytes, bytes, int]]] = {}
        for group in self.groups.values():
            entries = snapshot.setdefault(self.store.partition_for(group.group_id), [])
            if group.persisted_value is not None:
                entries.append((rec.group_key(group.group_id), group.persisted_value,
                                group.state_timestamp))
            for (topic, partition), c in group.offsets.items():
                entries.append((rec.offset_key(group.group_id, topic, partition),
                                rec.offset_value(rec.OffsetValue(
                                    c.offset, c.leader_epoch, c.metadata, c.commit_timestamp,
                                    c.expire_timestamp)), c.commit_timestamp))
        count = sum(len(entries) for entries in snapshot.values())
        started = time.monotonic()
        dropped = await self.store.rewrite(snapshot)
        log.info("rewrote %s to its %d live records: %d records dropped in %.3f s",
                 OFFSETS_TOPIC, count, dropped, time.monotonic() - started)
        return dropped
