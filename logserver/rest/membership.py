"""A subscribed REST consumer instance as a member of its Kafka consumer group.

The instance joins through the broker's own JoinGroup/SyncGroup/Heartbeat/LeaveGroup
handlers (as its principal, so the group ACLs apply), with Kafka's "consumer" protocol and
the range assignor: Kafka consumers of the same group, REST instances on this broker and
the group tools (``logserver group describe``, ``kafka-consumer-groups``) see one group,
and a rebalance splits the partitions over all of them. Like Kafka's eager protocol, a
rebalance revokes every partition until the new assignment arrives; reads then start
again at the committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from kafkaproto.client import Backoff, Failures
from logserver.admin_cli.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from logserver.rest import kafka_calls
from logserver.rest.errors import kafka_error_name

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
PROTOCOL_TYPE = "consumer"
ASSIGNOR = "range"
HEARTBEAT_INTERVAL_S = 1.0  # a rebalance started by another member is seen this soon
SESSION_TIMEOUT_MS = 45_000  # Kafka consumer's session.timeout.ms default
REBALANCE_TIMEOUT_MS = 30_000
#: After a failed join or a lost membership: retry.backoff.ms 100 up to 1 s, with jitter.
REJOIN_BACKOFF = Backoff(100, 1000)
# Errors after which the member joins again as a new member.
_FORGOTTEN = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})
# Errors after which it joins again with its member id (the coordinator ones: the group's
# coordinator is being chosen or loading; the next call asks who it is again).
_REJOIN = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                     ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class GroupMember:
    """Joins, syncs and heartbeats for one instance; ``assignment`` is what it reads."""

    def __init__(self, broker: WithCluster, group: str, client_id: str,
                 topics: Callable[[], list[str]],
                 revoked: Callable[[], None]) -> None:
        self.broker = broker
        self.group = group
        self.client_id = client_id
        self._topics = topics
        self._revoked = revoked
        self.member_id = ""
        self.generation = -1
        self.assignment: list[TopicPartition] | None = None  # None: between generations
        self.error: int = ErrorCode.NONE  # the last refusal that keeps it out (e.g. an ACL)
        self.assigned = asyncio.Event()
        self._rejoin = asyncio.Event()
        self._subscribed: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._context = contextvars.copy_context()

    def start(self) -> None:
        """Join in the background, in the current context (the instance's principal)."""
        self._context = contextvars.copy_context()
        self._task = asyncio.get_running_loop().create_task(self._run(), context=self._context)

    def resubscribe(self) -> None:
        """The subscription changed: join again with the new topics."""
        self._rejoin.set()

    async def stop(self) -> None:
        """Leave the group, so the others take the partitions at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.member_id:  # as the instance's principal, also when the reaper asks
            leave = kafka_calls.leave_group(self.broker, self.group, self.member_id,
                                            self.client_id)
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().create_task(leave, context=self._context.copy())
            self.member_id = ""
        self._revoke()

    def _revoke(self) -> None:
        if self.assignment is not None:
            self._revoked()
        self.assignment = None
        self.assigned.clear()

    async def _run(self) -> None:
        failures = Failures(REJOIN_BACKOFF)
        while True:
            try:
                if await self._join_and_sync():
                    failures.succeeded()
                    await self._heartbeat_until_rebalance()
                else:
                    await asyncio.sleep(failures.failed())
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the member die silently: retry
                log.exception("REST consumer %s of group %s: group membership failed",
                              self.client_id, self.group)
                await asyncio.sleep(failures.failed())

    async def _join_and_sync(self) -> bool:
        """One JoinGroup + SyncGroup round; True when it got an assignment."""
        self._revoke()
        self._rejoin.clear()
        self._subscribed = sorted(self._topics())
        join = await kafka_calls.join_group(
            self.broker, self.group, self.member_id, self.client_id, SESSION_TIMEOUT_MS,
            REBALANCE_TIMEOUT_MS, PROTOCOL_TYPE, [(ASSIGNOR, encode_subscription(self._subscribed))])
        if join.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id  # KIP-394: join again with it
            return await self._join_and_sync()
        if not self._accept(join.error_code):
            return False
        self.member_id, self.generation = join.member_id, join.generation_id
        assignments: dict[str, bytes] = {}
        if join.leader == join.member_id:
            assignments = self._assign({m.member_id: bytes(m.metadata) for m in join.members})
        sync = await kafka_calls.sync_group(self.broker, self.group, self.generation,
                                            self.member_id, self.client_id, PROTOCOL_TYPE,
                                            join.protocol_name or ASSIGNOR, assignments)
        if not self._accept(sync.error_code):
            return False
        self.error = ErrorCode.NONE
        self.assignment = sorted((topic, p) for topic, ps in
                                 decode_assignment(bytes(sync.assignment)).items() for p in ps)
        self.assigned.set()
        log.info("REST consumer %s of group %s: generation %d, assigned %s", self.client_id,
                 self.group, self.generation, self.assignment)
        return True

    def _accept(self, error: int) -> bool:
        if error == ErrorCode.NONE:
            return True
        if error in _FORGOTTEN:
            self.member_id = ""
        elif error not in _REJOIN:
            self.error = error
            log.warning("REST consumer %s of group %s: %s", self.client_id, self.group,
                        kafka_error_name(error))
        return False

    def _assign(self, metadata: dict[str, bytes]) -> dict[str, bytes]:
        """The leader's part: Kafka's RangeAssignor over every member's subscription."""
        members = {member: decode_subscription(data) for member, data in metadata.items()}
        counts = {}
        for topic in {t for topics in members.values() for t in topics}:
            count = self.broker.topics.partition_count(topic)
            if count:
                counts[topic] = count
        return {member: encode_assignment(share)
                for member, share in range_assign(members, counts).items()}

    async def _heartbeat_until_rebalance(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rejoin.wait(), HEARTBEAT_INTERVAL_S)
            if self._rejoin.is_set() or sorted(self._topics()) != self._subscribed:
                return  # a new subscription, or a new topic matching the pattern
            error = await kafka_calls.heartbeat(self.broker, self.group, self.generation,
                                                self.member_id, self.client_id)
            if error != ErrorCode.NONE:
                self._accept(error)
                return
