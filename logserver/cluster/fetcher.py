"""A follower's replica fetcher: Fetch requests with our replica id to the leader, the
batches appended with the leader's offsets, the leader's high watermark taken over.

The protocol work is the project's sans-I/O client core (kafkaproto.client); this is
the socket glue. One task per followed partition and leader epoch; the node cancels it
when the partition's leadership changes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkaproto import ApiKey, ErrorCode, FileRegion
from kafkaproto.client import ClientConnection
from kafkaproto.messages import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from logserver.cluster.epochs import end_offset_for_epoch, last_epoch
from logserver.cluster.wire import call

if TYPE_CHECKING:
    from logserver.storage.api import Storage

log = logging.getLogger(__name__)

FETCH_VERSION = 12
MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20
RETRY_S = 0.2


class ReplicaFetcher:
    def __init__(self, storage: Storage, node_id: int, topic: str, partition: int,
                 leader_epoch: int, address: tuple[str, int]) -> None:
        self.storage = storage
        self.node_id = node_id
        self.topic = topic
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.address = address
        self.reconciled = False  # our log's tail checked against the leader's (KIP-101)

    async def run(self) -> None:
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (OSError, asyncio.IncompleteReadError) as exc:
                log.debug("%s-%d: fetching from %s: %s", self.topic, self.partition, self.address, exc)
            except Exception:
                log.exception("%s-%d: replica fetcher failed", self.topic, self.partition)
            await asyncio.sleep(RETRY_S)

    async def _session(self) -> None:
        reader, writer = await asyncio.open_connection(*self.address)
        conn = ClientConnection(f"replica-{self.node_id}")
        try:
            if not self.reconciled:
                await self._truncate_divergent(conn, reader, writer)
                self.reconciled = True
            while True:
                response = await self._fetch(conn, reader, writer)
                if not await self._apply(response):
                    await asyncio.sleep(RETRY_S)
        finally:
            writer.close()

    async def _fetch(self, conn: ClientConnection, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> FetchResponse:
        leo = self.storage.log_end_offset(self.topic, self.partition)
        if leo is None:
            raise OSError("local partition not created yet")
        request = FetchRequest(
            replica_id=self.node_id, max_wait_ms=MAX_WAIT_MS, min_bytes=1,
            max_bytes=PARTITION_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=self.topic, partitions=[
                FetchRequest.FetchPartition(
                    partition=self.partition, current_leader_epoch=self.leader_epoch,
                    fetch_offset=leo, last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=PARTITION_MAX_BYTES)])],
            forgotten_topics_data=[], rack_id="")
        body = await call(conn, reader, writer, ApiKey.FETCH, FETCH_VERSION, request)
        if not isinstance(body, FetchResponse):
            raise OSError("undecodable fetch response")
        return body

    async def _truncate_divergent(self, conn: ClientConnection, reader: asyncio.StreamReader,
                                  writer: asyncio.StreamWriter) -> None:
        """KIP-101/KIP-279: ask the leader where the epoch of our last batch ends there,
        and cut our log to where both logs still agree before fetching."""
        mine = last_epoch(self.storage, self.topic, self.partition)
        if mine is None:
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.node_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=self.topic, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=self.partition, current_leader_epoch=self.leader_epoch,
                    leader_epoch=mine)])])
        body = await call(conn, reader, writer, ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, request)
        if not isinstance(body, OffsetForLeaderEpochResponse):
            raise OSError("undecodable OffsetForLeaderEpoch response")
        answer = body.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise OSError(f"OffsetForLeaderEpoch: {ErrorCode(answer.error_code).name}")
        leo = self.storage.log_end_offset(self.topic, self.partition) or 0
        if answer.leader_epoch < 0:
            if mine > self.leader_epoch:
                raise OSError(f"our last epoch {mine} is newer than the leader's {self.leader_epoch}")
            target = 0  # the leader has nothing from any epoch we have
        elif answer.leader_epoch < mine:
            # The leader never saw our last epoch: both agree up to the end of the
            # latest epoch both have, at the smaller of the two end offsets.
            _, ours = end_offset_for_epoch(self.storage, self.topic, self.partition,
                                           answer.leader_epoch)
            target = min(answer.end_offset, ours)
        else:
            target = min(answer.end_offset, leo)
        if target < leo:
            new_leo = await self.storage.truncate_to(self.topic, self.partition, target)
            log.warning("%s-%d: truncated divergent tail %d..%d (our last epoch %d, leader's "
                        "answer epoch %d end %d); log end now %d", self.topic, self.partition,
                        target, leo, mine, answer.leader_epoch, answer.end_offset, new_leo)

    async def _apply(self, response: FetchResponse) -> bool:
        """Append what came; False when the caller should back off before fetching again."""
        if response.error_code != ErrorCode.NONE or not response.responses:
            return False
        data = response.responses[0].partitions[0]
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leo = self.storage.log_end_offset(self.topic, self.partition)
            if leo is not None and leo < data.log_start_offset:
                await self._start_at(leo, data.log_start_offset)
                return True
            await self._truncate_to(data.high_watermark)
            return False
        if data.error_code != ErrorCode.NONE:
            log.debug("%s-%d: leader answered %s", self.topic, self.partition,
                      ErrorCode(data.error_code).name)
            return False
        records = data.records
        if isinstance(records, FileRegion):  # only the broker's own reads give these
            raise TypeError("fetched records as a file region")
        leo = self.storage.log_end_offset(self.topic, self.partition) or 0
        if records:
            # A writable copy: the log patches the batch header fields it owns in place.
            leo = self.storage.append_replica(self.topic, self.partition,
                                              memoryview(bytearray(records)))
        hw = min(data.high_watermark, leo)
        self.storage.set_high_watermark(self.topic, self.partition, hw)
        start = self.storage.log_start_offset(self.topic, self.partition)
        if start is not None and start < data.log_start_offset <= hw:
            # The leader's log start moved (DeleteRecords, retention): ours follows, as
            # Kafka's follower does, so a later leader serves no records deleted here.
            await self.storage.delete_records(self.topic, self.partition, data.log_start_offset)
        return True

    async def _start_at(self, leo: int, leader_start: int) -> None:
        """Our log ends below the leader's log start (records deleted there while we were
        away): nothing of ours is needed, so the log restarts, empty, at the leader's
        start (Kafka's truncateFullyAndStartAt) instead of asking for offsets forever."""
        await self.storage.restart_at(self.topic, self.partition, leader_start)
        log.warning("%s-%d: log end %d is below the leader's log start %d: log restarted there",
                    self.topic, self.partition, leo, leader_start)

    async def _truncate_to(self, leader_hw: int) -> None:  # a log ahead of the leader's
        """Our log runs past the new leader's: drop the tail above its high watermark
        (the records there were never committed) and fetch it again from the leader."""
        leo = self.storage.log_end_offset(self.topic, self.partition)
        if leo is None or leader_hw < 0 or leo <= leader_hw:
            return
        new_leo = await self.storage.truncate_to(self.topic, self.partition, leader_hw)
        log.warning("%s-%d: truncated from %d to %d to follow the leader (epoch %d)",
                    self.topic, self.partition, leo, new_leo, self.leader_epoch)
