"""Committed offsets: commit, fetch, delete, expire (Kafka's GroupMetadataManager part).

Sans-I/O like the membership machine, and on the same Group objects: every change to
``__consumer_offsets`` is an ``Append`` decision whose completion comes back through
``on_written``. A commit becomes visible to OffsetFetch only then, so a fetch never
returns an offset that a crash could still take back; until then it counts as pending
(``require_stable`` fetches see UNSTABLE_OFFSET_COMMIT). Offsets of deleted topics,
deleted groups and expired offsets are removed with tombstones, and an empty group
without offsets becomes Dead and is forgotten (Kafka's cleanupGroupMetadata).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import logserver.groups.records as rec
from kafkaproto import ErrorCode
from logserver.groups.decisions import Append, Decision, DecisionMaker, Reply, RequestId
from logserver.groups.group import CommittedOffset, Group, GroupState
from logserver.groups.membership import Membership

log = logging.getLogger(__name__)

EMPTY, STABLE, DEAD = GroupState.EMPTY, GroupState.STABLE, GroupState.DEAD

TopicPartition = tuple[str, int]
# topic, partition, offset, leader epoch, metadata, error
FetchedOffset = tuple[str, int, int, int, str, int]


@dataclass(frozen=True, slots=True)
class OffsetSettings:
    retention_ms: int = 7 * 24 * 3_600_000
    metadata_max_bytes: int = 4096

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OffsetSettings:
        return cls(config["offsets.retention.minutes"] * 60_000,
                   config["offset.metadata.max.bytes"])


@dataclass(frozen=True, slots=True)
class OffsetsWritten:
    """An OffsetCommit's records: applied and answered once durable."""

    group_id: str
    incarnation: int
    request: RequestId
    committed: tuple[tuple[TopicPartition, CommittedOffset], ...]
    errors: dict[TopicPartition, int]  # partitions refused before the append


@dataclass(frozen=True, slots=True)
class TombstonesWritten:
    """Tombstones of removed offsets (and of a forgotten group); ``request`` waits for it."""

    group_id: str
    count: int
    request: RequestId | None


@dataclass(slots=True)
class _WaitingReply:
    """A reply that waits for several appends (DeleteGroups)."""

    remaining: int
    result: Any


class Offsets(DecisionMaker):
    """Committed offsets of every group in ``membership.groups``."""

    def __init__(self, membership: Membership, settings: OffsetSettings | None = None,
                 consumer_subscriptions: Callable[[str], set[str] | None] | None = None) -> None:
        super().__init__()
        self.membership = membership
        self.groups = membership.groups
        self.settings = settings or OffsetSettings()
        self._waiting: dict[RequestId, _WaitingReply] = {}
        # topics a KIP-848 consumer group subscribes to (None: not such a group)
        self._consumer_subscriptions = consumer_subscriptions

    # -- OffsetCommit ----------------------------------------------------------------------

    def commit(self, now_ms: int, request: RequestId, group: Group,
               offsets: Mapping[TopicPartition, CommittedOffset]) -> list[Decision]:
        """Store offsets ``Membership.accept_commit`` let through; answers ``request`` with
        an error per partition once the append is durable."""
        self._begin(now_ms)
        errors: dict[TopicPartition, int] = {}
        valid: list[tuple[TopicPartition, CommittedOffset]] = []
        for tp, committed in offsets.items():
            if len(committed.metadata.encode()) > self.settings.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid.append((tp, committed))
        if not valid:
            self._out.append(Reply(request, errors))
            return self._done()
        records = tuple(
            (rec.offset_key(group.group_id, topic, partition),
             rec.offset_value(rec.OffsetValue(c.offset, c.leader_epoch, c.metadata,
                                              c.commit_timestamp, c.expire_timestamp)))
            for (topic, partition), c in valid)
        for tp, _ in valid:
            group.pending_commits[tp] += 1
        self._out.append(Append(group.group_id, records, OffsetsWritten(
            group.group_id, group.incarnation, request, tuple(valid), errors)))
        return self._done()

    def _on_offsets_written(self, written: OffsetsWritten, error: int,
                            base_offset: int) -> None:
        errors = dict(written.errors)
        group = self.groups.get(written.group_id)
        if group is not None and group.incarnation != written.incarnation:
            group = None  # deleted and created again meanwhile: not these offsets
        for index, (tp, committed) in enumerate(written.committed):
            errors[tp] = error
            if group is None or group.pending_commits[tp] <= 0:
                continue  # deleted (DeleteGroups/OffsetDelete) while being written
            group.pending_commits[tp] -= 1
            if group.pending_commits[tp] == 0:
                del group.pending_commits[tp]
            if error == ErrorCode.NONE:
                committed.log_offset = base_offset + index
                current = group.offsets.get(tp)
                if current is None or current.log_offset < committed.log_offset:
                    group.offsets[tp] = committed
        self._out.append(Reply(written.request, errors))

    # -- OffsetFetch -----------------------------------------------------------------------

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool) -> list[FetchedOffset]:
        """Committed offsets; -1 for partitions without one (null partitions: all)."""
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            if partitions is None:
                return []
            return [(t, p, -1, -1, "", ErrorCode.NONE) for t, p in partitions]
        if partitions is None:
            return [(t, p, c.offset, c.leader_epoch, c.metadata, ErrorCode.NONE)
                    for (t, p), c in sorted(group.offsets.items())]
        result: list[FetchedOffset] = []
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
        return result

    # -- DeleteGroups, OffsetDelete --------------------------------------------------------

    def delete_groups(self, now_ms: int, request: RequestId,
                      checked: list[tuple[str, int | None]]) -> list[Decision]:
        """``checked``: (group id, its ``group_status`` error). Answers ``request`` with
        [(group id, error)] once every deleted group's tombstones are durable."""
        self._begin(now_ms)
        results: list[tuple[str, int]] = []
        appends = 0
        for group_id, status in checked:
            error = status
            group = self.groups.get(group_id) if error is None else None
            if error is None and (group is None or group.is_(DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif error is None and group is not None and not group.is_(EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            if error is not None or group is None:
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND if error is None
                                else error))
                continue
            group.transition_to(DEAD, now_ms)
            removed = list(group.offsets)
            group.offsets.clear()
            group.pending_commits.clear()
            appends += self._cleanup_group(group, removed, request)
            log.info("group %s deleted with %d committed offsets", group_id, len(removed))
            results.append((group_id, ErrorCode.NONE))
        if appends:
            self._waiting[request] = _WaitingReply(appends, results)
        else:
            self._out.append(Reply(request, results))
        return self._done()

    def delete_offsets(self, now_ms: int, request: RequestId, group_id: str,
                       partitions: list[TopicPartition]) -> list[Decision]:
        """OffsetDelete for a group that passed ``group_status``; answers ``request`` with
        (group error, {partition: error}) once the tombstones are durable."""
        self._begin(now_ms)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            self._out.append(Reply(request, (ErrorCode.GROUP_ID_NOT_FOUND, {})))
            return self._done()
        errors: dict[TopicPartition, int] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            errors.update((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                          for tp in partitions if group.is_subscribed_to(tp[0]))
        else:
            self._out.append(Reply(request, (ErrorCode.NON_EMPTY_GROUP, {})))
            return self._done()
        appended = 0
        if eligible:
            removed = []
            for tp in eligible:
                group.pending_commits.pop(tp, None)
                if group.offsets.pop(tp, None) is not None:
                    removed.append(tp)
                errors[tp] = ErrorCode.NONE
            appended = self._cleanup_group(group, removed, request)
            log.info("group %s: deleted offsets of %s", group_id, sorted(eligible))
        result = (ErrorCode.NONE, errors)
        if appended:
            self._waiting[request] = _WaitingReply(appended, result)
        else:
            self._out.append(Reply(request, result))
        return self._done()

    # -- expiry and deleted topics ---------------------------------------------------------

    def expire(self, now_ms: int) -> tuple[int, list[Decision]]:
        """Kafka's offset expiry (offsets.retention.minutes): (offsets removed, decisions)."""
        self._begin(now_ms)
        removed_total = 0
        for group in list(self.groups.values()):
            removed = self._expired_offsets(group, now_ms)
            for tp in removed:
                del group.offsets[tp]
            self._cleanup_group(group, removed, None)
            removed_total += len(removed)
        if removed_total:
            log.info("expired %d committed offsets", removed_total)
        return removed_total, self._done()

    def _expired_offsets(self, group: Group, now: int) -> list[TopicPartition]:
        retention = self.settings.retention_ms

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

        subscribed = (self._consumer_subscriptions(group.group_id)
                      if self._consumer_subscriptions is not None else None)
        if subscribed is not None:
            # a consumer-protocol group (its classic entry only holds the offsets): the
            # offsets of topics its members subscribe to stay, the others age from commit
            return expired(lambda c: c.commit_timestamp, subscribed)
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

    def on_topic_deleted(self, now_ms: int, topic: str) -> tuple[int, list[Decision]]:
        """Kafka's handleDeletedPartitions: a deleted topic's committed offsets go too, so
        a topic created again under the same name does not resume from stale offsets."""
        self._begin(now_ms)
        removed_total = 0
        for group in list(self.groups.values()):
            removed = [tp for tp in group.offsets if tp[0] == topic]
            for tp in removed:
                del group.offsets[tp]
            for tp in [tp for tp in group.pending_commits if tp[0] == topic]:
                del group.pending_commits[tp]
            if removed:
                self._cleanup_group(group, removed, None)
                removed_total += len(removed)
        if removed_total:
            log.info("removed %d committed offsets of deleted topic %s", removed_total, topic)
        return removed_total, self._done()

    def _cleanup_group(self, group: Group, removed: list[TopicPartition],
                       request: RequestId | None) -> int:
        """Kafka's cleanupGroupMetadata: tombstones for removed offsets, and for the group
        itself once it is empty and holds no offsets (then it is forgotten). Returns the
        number of appends ``request`` now waits for (0 or 1)."""
        if group.is_(EMPTY) and not group.has_offsets() and not group.pending_members:
            log.info("group %s: empty and without offsets; now Dead", group.group_id)
            group.transition_to(DEAD, self._now)
        tombstones: list[tuple[bytes, bytes | None]] = [
            (rec.offset_key(group.group_id, t, p), None) for t, p in removed]
        if group.is_(DEAD) and self.groups.get(group.group_id) is group:
            self._out.extend(self.membership.forget(group))
            if group.generation_id > 0 or group.persisted_value is not None:
                tombstones.append((rec.group_key(group.group_id), None))
        if not tombstones:
            return 0
        self._out.append(Append(group.group_id, tuple(tombstones), TombstonesWritten(
            group.group_id, len(tombstones), request)))
        return 1

    def _on_tombstones_written(self, written: TombstonesWritten, error: int) -> None:
        if error != ErrorCode.NONE:
            log.warning("group %s: cannot write %d tombstones: %s", written.group_id,
                        written.count, ErrorCode(error).name)
        if written.request is None:
            return
        waiting = self._waiting.get(written.request)
        if waiting is None:
            return
        waiting.remaining -= 1
        if waiting.remaining <= 0:
            del self._waiting[written.request]
            self._out.append(Reply(written.request, waiting.result))

    # -- completions -----------------------------------------------------------------------

    def on_written(self, now_ms: int, written: OffsetsWritten | TombstonesWritten, error: int,
                   base_offset: int) -> list[Decision]:
        """An append of this module is durable (NONE) or failed."""
        self._begin(now_ms)
        if isinstance(written, OffsetsWritten):
            self._on_offsets_written(written, error, base_offset)
        else:
            self._on_tombstones_written(written, error)
        return self._done()
