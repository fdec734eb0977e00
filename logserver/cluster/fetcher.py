"""A follower's replica fetcher, one per source broker as Kafka's ReplicaFetcherThread:
one connection to a leader and one Fetch request (with our replica id) for every
partition this broker follows there; the batches are appended with the leader's offsets
and the leader's high watermark taken over. Partitions under a replication throttle
(throttle.py) are left out of a Fetch while this broker's follower quota is used up.

The connection is the project's asyncio Kafka client (commonlib.kafkaclient); a failed
session or a round that fetched nothing backs off with the project's one Backoff. The node adds a partition (at a leader epoch) when it starts following
it on that leader and removes it when its leadership changes; a response is applied
only to partitions still followed at the epoch it was asked for.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from commonlib.kafkaclient import AsyncConnection, Backoff, Failures
from kafkaproto import ApiKey, ErrorCode, FileRegion
from kafkaproto.errors import ProtocolError
from kafkaproto.messages import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from logserver.cluster.epochs import end_offset_for_epoch, last_epoch

if TYPE_CHECKING:
    from logserver.cluster.throttle import ReplicationThrottle
    from logserver.storage.api import StorageEngine

log = logging.getLogger(__name__)

FETCH_VERSION = 12
MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20  # Kafka's replica.fetch.max.bytes
RESPONSE_MAX_BYTES = 10 << 20  # Kafka's replica.fetch.response.max.bytes
#: After a failed session, or a round that fetched nothing: 0.2 s doubling up to 1 s
#: (Kafka's replica.fetch.backoff.ms), with jitter.
BACKOFF = Backoff(200, 1000)

Where = tuple[str, int]


@dataclass(eq=False)
class Followed:
    """One partition followed on this fetcher's leader, at the leader epoch we know."""

    leader_epoch: int
    reconciled: bool = False  # our log's tail checked against the leader's (KIP-101)
    max_bytes: int = PARTITION_MAX_BYTES  # what the next Fetch asks (less when throttled)


class ReplicaFetcher:
    def __init__(self, storage: StorageEngine, node_id: int, address: tuple[str, int],
                 throttle: ReplicationThrottle | None = None) -> None:
        self.storage = storage
        self.throttle = throttle
        self.node_id = node_id
        self.address = address
        self.partitions: dict[Where, Followed] = {}
        self._changed = asyncio.Event()
        self._failures = Failures(BACKOFF)

    def add(self, where: Where, leader_epoch: int) -> None:
        """Follow ``where`` on this leader at ``leader_epoch`` (a new epoch starts over:
        the tail is checked against the leader again before fetching)."""
        current = self.partitions.get(where)
        if current is None or current.leader_epoch != leader_epoch:
            self.partitions[where] = Followed(leader_epoch)
            self._changed.set()

    def remove(self, where: Where) -> None:
        self.partitions.pop(where, None)

    def _current(self, where: Where, followed: Followed) -> bool:
        return self.partitions.get(where) is followed

    async def run(self) -> None:
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (OSError, ProtocolError) as exc:  # KafkaConnectionError too
                log.debug("fetching from %s: %s", self.address, exc)
            except Exception:
                log.exception("replica fetcher for %s failed", self.address)
            await asyncio.sleep(self._failures.failed())

    async def _session(self) -> None:
        conn = await AsyncConnection.open(
            self.address[0], self.address[1], client_id=f"replica-{self.node_id}",
            request_timeout=None, connect_timeout=None, negotiate=False)
        try:
            while True:
                if not self.partitions:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                for where, followed in list(self.partitions.items()):
                    if not followed.reconciled:
                        await self._truncate_divergent(conn, where, followed)
                reconciled = {w: f for w, f in self.partitions.items() if f.reconciled}
                wanted = self._within_quota(reconciled)
                if not wanted:
                    # Held back by the throttle: ask again once the quota has drained.
                    throttle = self.throttle
                    await asyncio.sleep(throttle.follower_wait_s()
                                        if reconciled and throttle is not None
                                        else self._failures.failed())
                    continue
                response = await self._fetch(conn, wanted)
                if await self._apply(response, wanted):
                    self._failures.succeeded()
                else:
                    await asyncio.sleep(self._failures.failed())
        finally:
            conn.close("fetcher session over")

    def _within_quota(self, wanted: dict[Where, Followed]) -> dict[Where, Followed]:
        """Kafka's follower side of a replication throttle: while this broker's quota is
        used up, the throttled partitions stay out of the next Fetch; else together they
        ask for at most a second's worth of the rate."""
        throttle = self.throttle
        if throttle is None:
            return wanted
        out = {}
        budget: int | None = None  # throttled bytes this Fetch may still ask for
        for where, followed in wanted.items():
            followed.max_bytes = PARTITION_MAX_BYTES
            if throttle.follower_throttled(*where):
                if budget is None:
                    budget = throttle.follower_allowance()
                followed.max_bytes = min(PARTITION_MAX_BYTES, budget)
                budget -= followed.max_bytes
                if followed.max_bytes == 0:
                    continue
            out[where] = followed
        return out

    async def _fetch(self, conn: AsyncConnection, wanted: dict[Where, Followed]) -> FetchResponse:
        by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
        for (topic, index), followed in wanted.items():
            leo = self.storage.log_end_offset(topic, index)
            if leo is None:
                continue  # local log not created yet
            by_topic.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=index, current_leader_epoch=followed.leader_epoch, fetch_offset=leo,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=followed.max_bytes))
        request = FetchRequest(
            replica_id=self.node_id, max_wait_ms=MAX_WAIT_MS, min_bytes=1,
            max_bytes=RESPONSE_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=partitions)
                    for topic, partitions in by_topic.items()],
            forgotten_topics_data=[], rack_id="")
        body = await conn.request(ApiKey.FETCH, FETCH_VERSION, request)
        if not isinstance(body, FetchResponse):
            raise ProtocolError("undecodable fetch response")
        return body

    async def _truncate_divergent(self, conn: AsyncConnection, where: Where,
                                  followed: Followed) -> None:
        """KIP-101/KIP-279: ask the leader where the epoch of our last batch ends there,
        and cut our log to where both logs still agree before fetching. A refusal leaves
        the partition unreconciled (asked again next round); the others go on."""
        topic, partition = where
        mine = last_epoch(self.storage, topic, partition)
        if mine is None:
            followed.reconciled = True
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.node_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=partition, current_leader_epoch=followed.leader_epoch,
                    leader_epoch=mine)])])
        body = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, request)
        if not isinstance(body, OffsetForLeaderEpochResponse):
            raise ProtocolError("undecodable OffsetForLeaderEpoch response")
        answer = body.topics[0].partitions[0]
        if not self._current(where, followed):
            return
        if answer.error_code != ErrorCode.NONE:
            log.debug("%s-%d: OffsetForLeaderEpoch: %s", topic, partition,
                      ErrorCode(answer.error_code).name)
            return
        leo = self.storage.log_end_offset(topic, partition) or 0
        if answer.leader_epoch < 0:
            if mine > followed.leader_epoch:
                log.warning("%s-%d: our last epoch %d is newer than the leader's %d", topic,
                            partition, mine, followed.leader_epoch)
                return
            target = 0  # the leader has nothing from any epoch we have
        elif answer.leader_epoch < mine:
            # The leader never saw our last epoch: both agree up to the end of the
            # latest epoch both have, at the smaller of the two end offsets.
            _, ours = end_offset_for_epoch(self.storage, topic, partition, answer.leader_epoch)
            target = min(answer.end_offset, ours)
        else:
            target = min(answer.end_offset, leo)
        if target < leo:
            new_leo = await self.storage.truncate_to(topic, partition, target)
            log.warning("%s-%d: truncated divergent tail %d..%d (our last epoch %d, leader's "
                        "answer epoch %d end %d); log end now %d", topic, partition,
                        target, leo, mine, answer.leader_epoch, answer.end_offset, new_leo)
        followed.reconciled = True

    async def _apply(self, response: FetchResponse, wanted: dict[Where, Followed]) -> bool:
        """Append what came for each partition still followed at the epoch asked; False
        when nothing could be fetched (the caller backs off before asking again)."""
        if response.error_code != ErrorCode.NONE:
            return False
        fetched = False
        for topic_data in response.responses:
            for data in topic_data.partitions:
                where = (topic_data.topic, data.partition_index)
                followed = wanted.get(where)
                if followed is None or not self._current(where, followed):
                    continue  # no longer followed here, or at another epoch
                if await self._apply_partition(where, followed, data):
                    fetched = True
        return fetched

    async def _apply_partition(self, where: Where, followed: Followed,
                               data: FetchResponse.PartitionData) -> bool:
        topic, partition = where
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leo = self.storage.log_end_offset(topic, partition)
            if leo is not None and leo < data.log_start_offset:
                await self._start_at(where, leo, data.log_start_offset)
                return True
            await self._truncate_to(where, followed, data.high_watermark)
            return False
        if data.error_code != ErrorCode.NONE:
            log.debug("%s-%d: leader answered %s", topic, partition, ErrorCode(data.error_code).name)
            return False
        records = data.records
        if isinstance(records, FileRegion):  # only the broker's own reads give these
            raise TypeError("fetched records as a file region")
        leo = self.storage.log_end_offset(topic, partition) or 0
        if records and self.throttle is not None and self.throttle.follower_throttled(topic, partition):
            self.throttle.follower_received(len(records))
        if records:
            # A writable copy: the log patches the batch header fields it owns in place.
            leo = self.storage.append_replica(topic, partition, memoryview(bytearray(records)))
        hw = min(data.high_watermark, leo)
        self.storage.set_high_watermark(topic, partition, hw)
        start = self.storage.log_start_offset(topic, partition)
        if start is not None and start < data.log_start_offset <= hw:
            # The leader's log start moved (DeleteRecords, retention): ours follows, as
            # Kafka's follower does, so a later leader serves no records deleted here.
            await self.storage.delete_records(topic, partition, data.log_start_offset)
        return True

    async def _start_at(self, where: Where, leo: int, leader_start: int) -> None:
        """Our log ends below the leader's log start (records deleted there while we were
        away): nothing of ours is needed, so the log restarts, empty, at the leader's
        start (Kafka's truncateFullyAndStartAt) instead of asking for offsets forever."""
        topic, partition = where
        await self.storage.restart_at(topic, partition, leader_start)
        log.warning("%s-%d: log end %d is below the leader's log start %d: log restarted there",
                    topic, partition, leo, leader_start)

    async def _truncate_to(self, where: Where, followed: Followed, leader_hw: int) -> None:
        """Our log runs past the new leader's: drop the tail above its high watermark
        (the records there were never committed) and fetch it again from the leader."""
        topic, partition = where
        leo = self.storage.log_end_offset(topic, partition)
        if leo is None or leader_hw < 0 or leo <= leader_hw:
            return
        new_leo = await self.storage.truncate_to(topic, partition, leader_hw)
        log.warning("%s-%d: truncated from %d to %d to follow the leader (epoch %d)",
                    topic, partition, leo, new_leo, followed.leader_epoch)

