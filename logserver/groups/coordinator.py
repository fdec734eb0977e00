"""The classic group coordinator: the facade the group handlers call.

The decisions are made without I/O elsewhere: ``membership.py`` (joins, syncs,
heartbeats, leaves, rebalance timers) and ``offsets.py`` (commit, fetch, delete,
expire). This module is the glue that carries them out:

- A parked JoinGroup/SyncGroup is an asyncio future the handler awaits; the state
  machines know it by a request id. A client that disconnects cancels the future; the
  member stays until its timers say otherwise, as in Kafka (which cannot see disconnects
  of muted sockets either).
- Timer requests become ``loop.call_later`` handles (``timers.py``) and fired timers go
  back to the state machine. Nothing polls: every timer is re-armed or cancelled by the
  event that satisfies it.
- Writes to ``__consumer_offsets`` are appends with the broker's durability setting
  (``store.py``); the group only moves on (assignment handed out, offsets visible,
  response sent) when the append is as durable as that setting promises: the append's
  completion goes back to the state machine only then.
- Start-up replays ``__consumer_offsets`` (``loading.py``); group APIs answer "loading"
  meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import logserver.groups.loading as loading
import logserver.groups.records as rec
from kafkaproto import ErrorCode
from logserver.clock import SYSTEM_CLOCK, Clock
from logserver.coordinator_partitions import CoordinatorPartitions
from logserver.groups.consumer.machine import (
    NOT_A_CONSUMER_GROUP,
    ConsumerGroups,
    ConsumerSettings,
    ConsumerWritten,
    HeartbeatRequest,
    HeartbeatResult,
    TopicCatalog,
)
from logserver.groups.consumer.model import ConsumerGroup
from logserver.groups.decisions import (
    Append,
    ArmTimer,
    CancelTimer,
    Decision,
    Reply,
    RequestId,
    TimerKey,
    TimerKind,
)
from logserver.groups.group import CommittedOffset, Group, JoinResult, SyncResult
from logserver.groups.membership import (
    MAX_GROUP_ID_LENGTH,
    GroupWritten,
    LeavingMember,
    Membership,
    MembershipSettings,
    group_status,
)
from logserver.groups.offsets import (
    FetchedOffset,
    Offsets,
    OffsetSettings,
    OffsetsWritten,
    TombstonesWritten,
)
from logserver.groups.store import HasStorage, OffsetsStore
from logserver.groups.timers import Timers
from logserver.groups.txn_offsets import PendingTxnOffsets, newer
from logserver.internal_topics import GROUP_KEY_TYPE, OFFSETS_TOPIC

__all__ = ["MAX_GROUP_ID_LENGTH", "GroupCoordinator"]

log = logging.getLogger(__name__)

_CONSUMER_TIMERS = frozenset({TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REVOCATION})
OFFSET_EXPIRY_TIMER = TimerKey(TimerKind.OFFSET_EXPIRY)

TopicPartition = tuple[str, int]


class GroupCoordinator:
    """Every group of this node (a single node coordinates all of them).

    From the broker it takes only its settings and what ``OffsetsStore`` needs.
    """

    def __init__(self, broker: HasStorage, clock: Clock = SYSTEM_CLOCK) -> None:
        config = broker.config
        self.retention_check_ms: int = config["offsets.retention.check.interval.ms"]
        self.store = OffsetsStore(broker)
        self.membership = Membership(MembershipSettings.from_config(config))
        self.offsets = Offsets(self.membership, OffsetSettings.from_config(config),
                               self._consumer_subscriptions)
        # KIP-848 consumer-protocol groups beside the classic ones (groups/consumer)
        self.consumer = ConsumerGroups(ConsumerSettings.from_config(config))
        # topics as the consumer groups' assignors see them (the cluster's in cluster mode)
        self.catalog: TopicCatalog = broker.storage
        self.timers = Timers(lambda: self.loop, self._on_timer)
        self.active = False
        self.loading = True
        self.clock = clock
        self.now_ms: Callable[[], int] = clock.wall_ms  # tests may substitute a clock
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._requests: dict[RequestId, asyncio.Future[Any]] = {}
        self._request_ids = itertools.count(1)
        # Cluster mode: the ``__consumer_offsets`` partitions this broker leads and serves
        # (None: every partition, a single node) and those being loaded.
        self.partitions = CoordinatorPartitions()
        # TxnOffsetCommit offsets waiting for their transaction's marker (txn_offsets.py)
        self.txn_offsets = PendingTxnOffsets()
        # set once the start-up replay is done (the transaction coordinator then writes
        # the markers of transactions it finds prepared, offsets partitions included)
        self.loaded = asyncio.Event()

    @property
    def owned(self) -> set[int] | None:
        return self.partitions.owned

    @property
    def groups(self) -> dict[str, Group]:
        return self.membership.groups

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin replaying ``__consumer_offsets``; group APIs answer "loading" meanwhile."""
        self._loop = asyncio.get_running_loop()
        self.active = True
        self.loading = True
        self._load_task = self._loop.create_task(self._load())

    def start_partitioned(self) -> None:
        """Cluster mode: serve no group until told which ``__consumer_offsets``
        partitions this broker leads (``load_partition``); others get NOT_COORDINATOR."""
        self._loop = asyncio.get_running_loop()
        self.partitions.start_partitioned()
        self.store.kafka_layout = True
        self.active = True
        self.loading = False
        self.loaded.set()
        self.timers.arm(OFFSET_EXPIRY_TIMER, self.retention_check_ms)

    def load_partition(self, partition: int) -> None:
        """This broker leads ``partition`` now: replay it from the local replica (to its
        log end, as Kafka's loader) and serve its groups; until then their requests get
        COORDINATOR_LOAD_IN_PROGRESS. Nothing to do if already served or loading."""
        if not self._closed:
            self.partitions.begin_load(partition, self._load_partition)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads ``partition`` now: drop its groups (Kafka's
        removeGroupsForPartition); their members get NOT_COORDINATOR and find the new one."""
        if self.owned is None:
            return
        served, loading = self.partitions.drop(partition)
        if not served and not loading:
            return
        gone = [g for g in self.groups if self.store.partition_for(g) == partition]
        self._execute(self.membership.unload(gone))
        self._execute(self.consumer.unload(self._consumer_groups_of(partition)))
        self.txn_offsets.drop_groups(lambda g: self.store.partition_for(g) == partition)
        log.info("%s-%d: unloaded %d groups (no longer its leader)", OFFSETS_TOPIC, partition,
                 len(gone))

    async def _load_partition(self, partition: int) -> None:
        started = self.clock.monotonic()
        replayed = loading.Replay()
        try:
            for entry in self.store.iter_log(partition, to_log_end=True):
                replayed.apply(partition, entry)
                if replayed.records % loading.REPLAY_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("replaying %s-%d failed; serving the groups loaded so far",
                          OFFSETS_TOPIC, partition)
        if not self.partitions.still_loading(partition):
            return  # unloaded meanwhile
        now = self.now_ms()
        restored = [g for g in replayed.restore(now, self.membership.new_group)
                    if self.store.partition_for(g.group_id) == partition]
        self._execute(self.membership.unload(g.group_id for g in restored))  # stale copies
        for group in restored:
            self._execute(self.membership.adopt(now, group))
        # KIP-848 groups come back as they were last written, member epochs included, so
        # their members go on heartbeating and committing here as at the old coordinator
        # (Kafka's replay of the consumer group records when a partition is loaded).
        consumer_groups = [g for g in replayed.consumer.restore(now, self.catalog)
                           if self.store.partition_for(g.group_id) == partition]
        self._execute(self.consumer.unload(self._consumer_groups_of(partition)))
        for consumer_group in consumer_groups:
            self._execute(self.consumer.adopt(now, consumer_group))
        mine: Callable[[str], bool] = lambda g: self.store.partition_for(g) == partition  # noqa: E731
        self.txn_offsets.drop_groups(mine)
        self.txn_offsets.merge(replayed.txn, mine)
        self.partitions.loaded(partition)
        log.info("%s-%d: loaded %d groups, %d consumer-protocol groups and %d committed "
                 "offsets from %d records in %.3f s", OFFSETS_TOPIC, partition,
                 len(restored), len(consumer_groups), sum(len(g.offsets) for g in restored),
                 replayed.records, self.clock.monotonic() - started)

    def _consumer_groups_of(self, partition: int) -> list[str]:
        """The consumer-protocol groups this broker holds in ``partition``."""
        return [g.group_id for g in self.consumer.list_groups()
                if self.store.partition_for(g.group_id) == partition]

    async def close(self) -> None:
        """Answer every parked JoinGroup/SyncGroup at once; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.active = False
        self.loaded.set()  # nobody waits for a load that will not finish
        loads = self.partitions.cancel_loads()
        for partition_load in loads:  # none left pending when the loop closes
            with contextlib.suppress(asyncio.CancelledError):
                await partition_load
        task = self._load_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._execute(self.membership.shutdown())
        self._execute(self.consumer.shutdown())
        self.timers.close()
        log.info("group coordinator stopped (%d groups)", len(self.groups))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def ensure_offsets_topic(self) -> int | None:
        """Create ``__consumer_offsets`` if missing (on the storage worker); an error code
        if it cannot be."""
        return await self.store.ensure_topic()

    # -- the glue: requests, timers, appends ----------------------------------------------

    def _park(self) -> tuple[RequestId, asyncio.Future[Any]]:
        request = next(self._request_ids)
        future: asyncio.Future[Any] = self.loop.create_future()
        self._requests[request] = future
        future.add_done_callback(lambda _: self._requests.pop(request, None))
        return request, future

    def _answered(self, result: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()
        future.set_result(result)
        return future

    def _status(self, group_id: str | None, *, allow_empty: bool) -> int | None:
        error = group_status(group_id, allow_empty=allow_empty, active=self.active,
                             loading=self.loading)
        if error is not None or self.owned is None or group_id is None:
            return error
        return self.partitions.error(self.store.partition_for(group_id))

    def _execute(self, decisions: list[Decision]) -> None:
        """Carry out decisions in order; an append that is done at once (no durability
        wait, or an error) feeds its completion back after the decisions before it."""
        queue = deque(decisions)
        while queue:
            decision = queue.popleft()
            if isinstance(decision, Reply):
                future = self._requests.pop(decision.request, None)
                if future is not None and not future.done():
                    future.set_result(decision.result)
            elif isinstance(decision, ArmTimer):
                self.timers.arm(decision.key, decision.delay_ms)
            elif isinstance(decision, CancelTimer):
                self.timers.cancel(decision.key)
            elif isinstance(decision, Append):
                done = self._append(decision)
                if done is not None:
                    queue.extend(self._written(decision.then, *done))

    def _append(self, append: Append) -> tuple[int, int] | None:
        """(error, base offset) if the append is settled now, else None: its completion
        is fed back once the durability wait is over."""
        outcome = self.store.append(append.group_id, list(append.records))
        if outcome.error != ErrorCode.NONE or outcome.wait is None:
            return outcome.error, outcome.base_offset
        base_offset = outcome.base_offset

        def durable(wait: asyncio.Future[None]) -> None:
            # Kafka maps KAFKA_STORAGE_ERROR to NOT_COORDINATOR for group clients
            failed = wait.cancelled() or wait.exception() is not None
            error = ErrorCode.NOT_COORDINATOR if failed else ErrorCode.NONE
            self._execute(self._written(append.then, error, base_offset))

        outcome.wait.add_done_callback(durable)
        return None

    def _written(self, then: Any, error: int, base_offset: int) -> list[Decision]:
        now = self.now_ms()
        if isinstance(then, GroupWritten):
            return self.membership.on_group_written(now, then, error)
        if isinstance(then, OffsetsWritten | TombstonesWritten):
            return self.offsets.on_written(now, then, error, base_offset)
        if isinstance(then, ConsumerWritten):
            return self.consumer.on_written(now, then, error)
        raise TypeError(f"unknown append completion {then!r}")

    def _on_timer(self, key: TimerKey) -> None:
        if key == OFFSET_EXPIRY_TIMER:
            self._on_expiry_timer()
        elif key.kind in _CONSUMER_TIMERS:
            self._execute(self.consumer.on_timer(self.now_ms(), key, self.catalog))
        else:
            self._execute(self.membership.on_timer(self.now_ms(), key))

    # -- FindCoordinator ------------------------------------------------------------------

    async def find_coordinator(self, key_type: int) -> tuple[int, str | None]:
        """(error, message) for one key; NONE means "this node". The first lookup waits
        for ``__consumer_offsets`` to be created (on the storage worker)."""
        if key_type != GROUP_KEY_TYPE:
            return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running"
        if self.loading:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"loading {OFFSETS_TOPIC}"
        error = await self.ensure_offsets_topic()
        if error is not None:
            return error, f"cannot create {OFFSETS_TOPIC}"
        return ErrorCode.NONE, None

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------------------------

    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, support_skip_assignment: bool,
                   client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None
                   ) -> asyncio.Future[JoinResult]:
        error = self._status(group_id, allow_empty=False)
        if error is None and self.consumer.is_consumer_group(group_id):
            # an empty consumer group may become a classic one (as in Kafka); not a live one
            error, decisions = self.consumer.delete_group(self.now_ms(), group_id, self.catalog)
            self._execute(decisions)
            if error is not None:
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return self._answered(JoinResult(member_id, error))
        request, future = self._park()
        self._execute(self.membership.join_group(
            self.now_ms(), request, group_id=group_id, member_id=member_id,
            group_instance_id=group_instance_id, require_known_member_id=require_known_member_id,
            support_skip_assignment=support_skip_assignment, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms, protocol_type=protocol_type,
            protocols=protocols, reason=reason))
        return future

    def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]
                   ) -> asyncio.Future[SyncResult]:
        error = self._status(group_id, allow_empty=False)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the restart: rejoin (older clients do not
            # know COORDINATOR_LOAD_IN_PROGRESS here).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return self._answered(SyncResult(error))
        request, future = self._park()
        self._execute(self.membership.sync_group(
            self.now_ms(), request, group_id=group_id, generation_id=generation_id,
            member_id=member_id, group_instance_id=group_instance_id,
            protocol_type=protocol_type, protocol_name=protocol_name, assignments=assignments))
        return future

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        error = self._status(group_id, allow_empty=False)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # as Kafka: the member learns of its fate after loading
        if error is not None:
            return error
        error, decisions = self.membership.heartbeat(
            self.now_ms(), group_id=group_id, member_id=member_id,
            group_instance_id=group_instance_id, generation_id=generation_id)
        self._execute(decisions)
        return error

    def leave_group(self, group_id: str, leaving: list[LeavingMember]
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        error = self._status(group_id, allow_empty=False)
        if error is not None:
            return error, []
        error, results, decisions = self.membership.leave_group(self.now_ms(), group_id, leaving)
        self._execute(decisions)
        return error, results

    # -- OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups ----------------------------

    def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: dict[TopicPartition, CommittedOffset],
                       api_version: int | None = None
                       ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Validate and persist; resolves to an error per partition once durable.

        In a consumer-protocol group ``generation_id`` is the member epoch (v9+)."""
        error = self._status(group_id, allow_empty=True)
        group = None
        if error is None and self.consumer.is_consumer_group(group_id):
            error, group = self._consumer_commit(group_id, member_id, generation_id,
                                                 9 if api_version is None else api_version)
        elif error is None:
            error, group, decisions = self.membership.accept_commit(
                self.now_ms(), group_id=group_id, member_id=member_id,
                group_instance_id=group_instance_id, generation_id=generation_id)
            self._execute(decisions)
        if error is not None or group is None:
            return self._answered(dict.fromkeys(offsets, error))
        request, future = self._park()
        self._execute(self.offsets.commit(self.now_ms(), request, group, offsets))
        return future

    def _consumer_subscriptions(self, group_id: str) -> set[str] | None:
        if not self.consumer.is_consumer_group(group_id):
            return None
        return self.consumer.subscribed_topics(group_id, self.catalog)

    def _consumer_commit(self, group_id: str, member_id: str, member_epoch: int,
                         version: int | None) -> tuple[int | None, Group | None]:
        """A commit to a consumer-protocol group: the member and its epoch are checked by
        the consumer machine; the offsets live in the classic bookkeeping's group entry."""
        error = self.consumer.validate_commit(group_id, member_id, member_epoch, version)
        if error is not None and error != NOT_A_CONSUMER_GROUP:
            return error, None
        who = f"member {member_id} (epoch {member_epoch})" if error is None and member_id \
            else "a client outside its membership"
        why = (f"offset commit by {who} of this consumer-protocol group: "
               f"created the entry that holds its committed offsets")
        error, group, decisions = self.membership.accept_commit(
            self.now_ms(), group_id=group_id, member_id="", group_instance_id=None,
            generation_id=-1, why=why)
        self._execute(decisions)
        return error, group

    def check_txn_offset_commit(self, *, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int) -> int:
        """TxnOffsetCommit's group checks (the same as OffsetCommit's), v3+."""
        error = self._status(group_id, allow_empty=True)
        if error is not None:
            return error
        if self.consumer.is_consumer_group(group_id):
            error, _ = self._consumer_commit(group_id, member_id, generation_id, None)
            return ErrorCode.NONE if error is None else error
        error, _, decisions = self.membership.accept_commit(
            self.now_ms(), group_id=group_id, member_id=member_id,
            group_instance_id=group_instance_id, generation_id=generation_id)
        self._execute(decisions)
        return ErrorCode.NONE if error is None else error

    async def txn_offset_commit(self, *, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int,
                                check_member: bool, producer_id: int, producer_epoch: int,
                                offsets: Mapping[TopicPartition, CommittedOffset]
                                ) -> dict[TopicPartition, int]:
        """Hold a transaction's offsets until its marker reaches the group's partition
        (``complete_txn``): appended there as a transactional batch of the producer, so
        a new coordinator replays them; answered once that append is durable. An older
        producer epoch than the partition knows is PRODUCER_FENCED."""
        error = self._status(group_id, allow_empty=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if self.owned is None and not self.store.exists():  # one node: created on first use
            created = await self.ensure_offsets_topic()
            if created is not None:
                return dict.fromkeys(offsets, created)
        return await self._txn_offset_commit(
            group_id, member_id, group_instance_id, generation_id, check_member, producer_id,
            producer_epoch, offsets)

    def _txn_offset_commit(self, group_id: str, member_id: str, group_instance_id: str | None,
                           generation_id: int, check_member: bool, producer_id: int,
                           producer_epoch: int, offsets: Mapping[TopicPartition, CommittedOffset]
                           ) -> asyncio.Future[dict[TopicPartition, int]]:
        error: int | None
        if check_member:
            error = self.check_txn_offset_commit(
                group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
                generation_id=generation_id) or None
        else:
            error = self._status(group_id, allow_empty=True)
        if error is not None:
            return self._answered(dict.fromkeys(offsets, error))
        limit = self.offsets.settings.metadata_max_bytes
        errors = {tp: int(ErrorCode.OFFSET_METADATA_TOO_LARGE) for tp, c in offsets.items()
                  if len(c.metadata.encode()) > limit}
        valid = [(tp, c) for tp, c in offsets.items() if tp not in errors]
        if not valid:
            return self._answered(errors)
        records = [(rec.offset_key(group_id, topic, partition),
                    rec.offset_value(rec.OffsetValue(c.offset, c.leader_epoch, c.metadata,
                                                     c.commit_timestamp, c.expire_timestamp)))
                   for (topic, partition), c in valid]
        outcome = self.store.append_transactional(group_id, records, producer_id, producer_epoch)
        if outcome.error != ErrorCode.NONE:
            refused = (ErrorCode.PRODUCER_FENCED if outcome.error == ErrorCode.INVALID_PRODUCER_EPOCH
                       else outcome.error)
            return self._answered({**errors, **dict.fromkeys((tp for tp, _ in valid), refused)})
        placed = {tp: dataclasses.replace(c, log_offset=outcome.base_offset + index)
                  for index, (tp, c) in enumerate(valid)}
        self.txn_offsets.add(producer_id, group_id, placed)
        if outcome.wait is None:
            return self._answered({**errors, **dict.fromkeys(placed, ErrorCode.NONE)})
        future: asyncio.Future[dict[TopicPartition, int]] = self.loop.create_future()

        def durable(wait: asyncio.Future[None]) -> None:
            failed = wait.cancelled() or wait.exception() is not None
            if failed:  # a marker must not make offsets visible that a new leader lacks
                self.txn_offsets.discard(producer_id, group_id, placed)
            error = ErrorCode.NOT_COORDINATOR if failed else ErrorCode.NONE
            if not future.done():
                future.set_result({**errors, **dict.fromkeys(placed, error)})

        outcome.wait.add_done_callback(durable)
        return future

    def marker_status(self, partition: int) -> int | None:
        """Why a transaction marker may not be written to ``partition`` of
        ``__consumer_offsets`` now (its groups are being loaded: retried), or None."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.loading or partition in self.partitions.loads:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self.owned is not None and partition not in self.owned:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def complete_txn(self, partition: int, producer_id: int, *, commit: bool) -> None:
        """The transaction's marker is durable in ``partition`` of ``__consumer_offsets``
        (Kafka's scheduleHandleTxnCompletion): the producer's offsets for the groups
        there become committed offsets, or are dropped. Nothing more is written: the
        batch and the marker in the log are what a replay resolves the same way."""
        committed: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        taken = self.txn_offsets.resolve(producer_id, commit, committed,
                                         lambda g: self.store.partition_for(g) == partition)
        now = self.now_ms()
        for group_id, offsets in committed.items():
            group = self.groups.get(group_id)
            if group is None:
                _, group, decisions = self.membership.accept_commit(
                    now, group_id=group_id, member_id="", group_instance_id=None,
                    generation_id=-1,
                    why=f"created for the offsets of producer {producer_id}'s committed transaction")
                self._execute(decisions)
            if group is None:
                log.error("group %s: cannot hold the offsets of producer %d's transaction",
                          group_id, producer_id)
                continue
            for tp, offset in offsets.items():
                if newer(group.offsets.get(tp), offset):
                    group.offsets[tp] = offset
        if taken:
            log.info("%s-%d: producer %d's transaction %s the offsets of %s", OFFSETS_TOPIC,
                     partition, producer_id, "committed" if commit else "dropped", sorted(taken))

    def commit_txn_offsets(self, group_id: str, offsets: dict[TopicPartition, CommittedOffset]
                           ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Make a committed transaction's offsets visible, for a transaction recorded by
        an older version of this server (which kept the offsets in the transaction's
        state and wrote them as plain commits)."""
        error = self._status(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if error is None and group is None:
            error, group, decisions = self.membership.accept_commit(
                self.now_ms(), group_id=group_id, member_id="", group_instance_id=None,
                generation_id=-1, why="created for a committed transaction's offsets")
            self._execute(decisions)
        if error is not None or group is None:
            return self._answered(dict.fromkeys(offsets, error or ErrorCode.COORDINATOR_NOT_AVAILABLE))
        request, future = self._park()
        self._execute(self.offsets.commit(self.now_ms(), request, group, offsets))
        return future

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[int, list[FetchedOffset]]:
        """(group error, [(topic, partition, offset, leader epoch, metadata, error)]).

        A member of a consumer-protocol group (OffsetFetch v9) must send its epoch."""
        error = self._status(group_id, allow_empty=True)
        if error is None:
            error = self.consumer.validate_fetch(group_id, member_id, member_epoch)
        if error is not None:
            return error, []
        rows = self.offsets.fetch(group_id, partitions, require_stable)
        pending = self.txn_offsets.partitions(group_id) if require_stable else set()
        if pending:  # KIP-447: an open transaction is about to commit these
            rows = [(t, p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT) if (t, p) in pending
                    else (t, p, o, e, m, err) for t, p, o, e, m, err in rows]
        return ErrorCode.NONE, rows

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> asyncio.Future[tuple[int, dict[TopicPartition, int]]]:
        error = self._status(group_id, allow_empty=False)
        if error is not None:
            return self._answered((error, {}))
        refused: dict[TopicPartition, int] = {}
        if self.consumer.is_consumer_group(group_id):
            # as Kafka: a live consumer group keeps the offsets of topics it subscribes to
            subscribed = self.consumer.subscribed_topics(group_id, self.catalog)
            refused = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                       if tp[0] in subscribed}
            partitions = [tp for tp in partitions if tp[0] not in subscribed]
            if group_id not in self.groups:  # nothing committed: nothing to delete
                return self._answered((ErrorCode.NONE, {**dict.fromkeys(partitions, 0),
                                                        **refused}))
        request, future = self._park()
        self._execute(self.offsets.delete_offsets(self.now_ms(), request, group_id, partitions))
        if not refused:
            return future
        merged: asyncio.Future[tuple[int, dict[TopicPartition, int]]] = self.loop.create_future()

        def merge(done: asyncio.Future[tuple[int, dict[TopicPartition, int]]]) -> None:
            if not merged.done() and not done.cancelled():
                error, errors = done.result()
                merged.set_result((error, {**errors, **refused}))

        future.add_done_callback(merge)
        return merged

    def delete_groups(self, group_ids: list[str]) -> asyncio.Future[list[tuple[str, int]]]:
        request, future = self._park()
        checked = [(group_id, self._status(group_id, allow_empty=True))
                   for group_id in group_ids]
        for index, (group_id, status) in enumerate(checked):
            if status is None and self.consumer.is_consumer_group(group_id):
                error, decisions = self.consumer.delete_group(self.now_ms(), group_id,
                                                              self.catalog)
                self._execute(decisions)
                if error is not None:
                    checked[index] = (group_id, error)
                elif group_id not in self.groups:
                    # no offsets were committed: nothing else to delete (Kafka: NONE)
                    checked[index] = (group_id, ErrorCode.NONE)
        self._execute(self.offsets.delete_groups(self.now_ms(), request, checked))
        return future

    # -- ListGroups, DescribeGroups -------------------------------------------------------

    def list_groups(self, states: Iterable[str]) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of classic and consumer groups."""
        error, listed = self.list_groups_typed(states)
        return error, [(g, p, s) for g, p, s, _ in listed]

    def list_groups_typed(self, states: Iterable[str], types: Iterable[str] = ()
                          ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]); ``types`` filters by
        "classic" / "consumer" (ListGroups v5, any case)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        states = list(states)
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = [(g, p, s, "classic") for g, p, s in self.membership.list_groups(states)
                  if not self.consumer.is_consumer_group(g)]
        listed += [(g.group_id, "consumer", g.state.value, "consumer")
                   for g in self.consumer.list_groups()
                   if not wanted_states or g.state.value.lower() in wanted_states]
        return error, [row for row in listed if not wanted_types or row[3] in wanted_types]

    def describe_group(self, group_id: str) -> tuple[int, Group | None]:
        """(error, group); a group we do not know describes as Dead, as in Kafka."""
        error = self._status(group_id, allow_empty=True)
        if error is not None:
            return error, None
        return ErrorCode.NONE, self.membership.describe(group_id)

    def describe_consumer_group(self, group_id: str) -> tuple[int, ConsumerGroup | None]:
        """(error, group): GROUP_ID_NOT_FOUND unless it is a consumer-protocol group."""
        error = self._status(group_id, allow_empty=False)
        if error is not None:
            return error, None
        group = self.consumer.describe(group_id)
        return (ErrorCode.GROUP_ID_NOT_FOUND if group is None else ErrorCode.NONE), group

    # -- ConsumerGroupHeartbeat (KIP-848) --------------------------------------------------

    def consumer_group_heartbeat(self, hb: HeartbeatRequest) -> asyncio.Future[HeartbeatResult]:
        """Resolves once the records the heartbeat caused are durable."""
        error = self._status(hb.group_id, allow_empty=True)
        message = None
        if error is None:
            classic = self.groups.get(hb.group_id)
            if (classic is not None and classic.members
                    and not self.consumer.is_consumer_group(hb.group_id)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
                message = f"Group {hb.group_id} is not a consumer group."
        if error is not None:
            return self._answered(HeartbeatResult(error, message))
        request, future = self._park()
        self._execute(self.consumer.heartbeat(self.now_ms(), request, hb, self.catalog))
        return future

    # -- expiry, deleted topics -----------------------------------------------------------

    def expire_offsets(self) -> int:
        """Kafka's offset expiry (offsets.retention.minutes); returns offsets removed."""
        removed, decisions = self.offsets.expire(self.now_ms())
        self._execute(decisions)
        self._forget_empty_consumer_groups()
        return removed

    def _on_expiry_timer(self) -> None:
        if not self.active:
            return
        try:
            self.expire_offsets()
        except Exception:  # a bug here must not stop future cleanups
            log.exception("offset expiry failed")
        self.timers.arm(OFFSET_EXPIRY_TIMER, self.retention_check_ms)

    def _forget_empty_consumer_groups(self) -> None:
        """As Kafka's cleanup: a consumer group without members or offsets is deleted."""
        for group_id in [g.group_id for g in self.consumer.list_groups() if not g.members]:
            holder = self.groups.get(group_id)
            if holder is None or not holder.has_offsets():
                _, decisions = self.consumer.delete_group(self.now_ms(), group_id, self.catalog)
                self._execute(decisions)

    def member_count(self, group_id: str) -> int:
        """Members of a classic or consumer-protocol group (0 if unknown)."""
        consumer_group = self.consumer.describe(group_id)
        if consumer_group is not None:
            return len(consumer_group.members)
        group = self.membership.describe(group_id)
        return 0 if group is None else len(group.members)

    async def on_topic_deleted(self, topic: str) -> int:
        """A deleted topic's committed offsets go too (Kafka's handleDeletedPartitions);
        if it was ``__consumer_offsets``, the live state is written to a new one."""
        if topic == OFFSETS_TOPIC:
            log.warning("%s was deleted; writing the live groups and offsets to a new one",
                        OFFSETS_TOPIC)
            self.loading = True  # no group writes between the snapshot and its append
            try:
                if await self.ensure_offsets_topic() is None:
                    await self.rewrite()
            finally:
                self.loading = False
            return 0
        removed, decisions = self.offsets.on_topic_deleted(self.now_ms(), topic)
        self._execute(decisions)
        return removed

    # -- load and rewrite -----------------------------------------------------------------

    async def _load(self) -> None:
        started = self.clock.monotonic()
        total = 0
        try:
            if self.store.exists():
                replayed = await loading.replay(self.store)
                total = replayed.records
                now = self.now_ms()
                for group in replayed.restore(now, self.membership.new_group):
                    self._execute(self.membership.adopt(now, group))
                for consumer_group in replayed.consumer.restore(now, self.catalog):
                    self._execute(self.consumer.adopt(now, consumer_group))
                self.txn_offsets.merge(replayed.txn, lambda _: True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("replaying %s failed; serving the groups loaded so far",
                          OFFSETS_TOPIC)
        offsets = sum(len(g.offsets) for g in self.groups.values())
        log.info("loaded %d groups and %d committed offsets from %d records of %s in %.3f s",
                 len(self.groups), offsets, total, OFFSETS_TOPIC, self.clock.monotonic() - started)
        # Not while a transaction's offsets wait for its marker: the snapshot holds only
        # committed offsets, and the old segments hold the transactional batch.
        if not self.txn_offsets and self.store.should_rewrite(total, self.live_records()):
            try:
                await self.rewrite()
            except Exception:  # the old segments are still there: nothing is lost
                log.exception("rewriting %s failed", OFFSETS_TOPIC)
        self.loading = False
        self.loaded.set()
        self.timers.arm(OFFSET_EXPIRY_TIMER, self.retention_check_ms)

    def live_records(self) -> int:
        return (loading.live_records(self.groups.values())
                + sum(len(g.persisted) for g in self.consumer.groups.values()))

    async def rewrite(self) -> int:
        """Compact ``__consumer_offsets`` to its live records (see store.py); at start-up."""
        extra = [(g.group_id, key, value) for g in self.consumer.groups.values()
                 for key, value in g.persisted.items()]
        return await loading.rewrite(self.store, self.groups.values(), extra)

