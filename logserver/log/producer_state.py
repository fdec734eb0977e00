"""Idempotent-producer state of one partition, after Kafka's ProducerStateManager.

For every producer id the partition remembers the epoch and the metadata of its last
five batches (Kafka's window: a Java producer has at most five requests in flight), so a
retried batch is acknowledged with its original offsets instead of being appended twice,
and a gap in sequence numbers is refused. Only batch headers are used.

Persistence, as in Kafka: a snapshot file ``NNNNNNNNNNNNNNNNNNNN.snapshot`` named by the
log offset it covers up to (exclusive) is written on roll and on clean close; on open
the latest valid snapshot at or below the log end offset is loaded and the batch headers
after it are replayed by the Log (after a kill -9 that replay covers everything since
the last snapshot).

Open transactions are producer state too (Kafka's ``ongoingTxns``): a transactional
batch opens one for its producer id at its base offset, a marker closes it. They give
the last stable offset, and they are in the snapshot, so after a clean stop neither
needs the log read again.

A transactional batch matching a cached batch whose transaction has ended here (its
marker written) is no duplicate: clients resolve every batch of a transaction before
ending it, so it is a new transaction's batch reusing a sequence, checked as new (out of
order). Acknowledged as a duplicate, that transaction would commit without its records.

Each producer also keeps the coordinator epoch of its last marker (Kafka's
``ProducerStateEntry.coordinatorEpoch``, read from the marker's control record): the
partition leader refuses a marker from an older transaction coordinator epoch
(TRANSACTION_COORDINATOR_FENCED), so a zombie coordinator cannot commit or abort.
Snapshot format 3 holds it; a format 1 snapshot (no transactions) or 2 (no coordinator
epochs) is passed over and the log replayed instead, once.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import zlib
from collections import deque
from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from kafkaproto.batch import BatchHeader
from logserver.log.fsutil import atomic_write

logger = logging.getLogger(__name__)

__all__ = [
    "APPEND",
    "INVALID_PRODUCER_EPOCH",
    "MAX_CACHED_BATCHES",
    "OUT_OF_ORDER_SEQUENCE",
    "BatchMetadata",
    "Decision",
    "ProducerEntry",
    "ProducerStateManager",
    "Verdict",
    "snapshot_file_name",
]

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_INT32_MAX = 2**31 - 1
_MAGIC = b"LSPS"
_VERSION = 3  # 2: open transactions after the producers; 3: coordinator epochs
_TXN_COUNT = struct.Struct(">I")
_TXN = struct.Struct(">qq")  # producer id, first offset of its open transaction
_FILE_HEADER = struct.Struct(">4sHII")  # magic, version, crc32 of the rest, producer count
# producer id, epoch, batch count, last seen (ms), coordinator epoch of its last marker
_PRODUCER = struct.Struct(">qhBqi")
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, base offset, last offset, timestamp


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class _OldSnapshotError(Exception):
    """A version 1 or 2 snapshot: valid, but without open transactions or coordinator
    epochs."""


class Verdict(IntEnum):
    """What to do with an incoming batch; the broker maps these to Produce errors."""

    APPEND = 0
    DUPLICATE = 1  # acknowledge with the original batch's offsets, do not append
    OUT_OF_ORDER_SEQUENCE = 2  # OUT_OF_ORDER_SEQUENCE_NUMBER (45)
    INVALID_PRODUCER_EPOCH = 3  # INVALID_PRODUCER_EPOCH (47): fenced by a newer epoch


class Decision(NamedTuple):
    """Verdict plus, for DUPLICATE, the original batch's offsets and max timestamp."""

    verdict: Verdict
    base_offset: int = -1
    last_offset: int = -1
    timestamp: int = -1
    detail: str = ""


APPEND = Decision(Verdict.APPEND)
# Shared instances for the common refusals; ``detail`` versions are built on demand.
OUT_OF_ORDER_SEQUENCE = Decision(Verdict.OUT_OF_ORDER_SEQUENCE)
INVALID_PRODUCER_EPOCH = Decision(Verdict.INVALID_PRODUCER_EPOCH)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer id's epoch and its last ``MAX_CACHED_BATCHES`` batches."""

    __slots__ = ("batches", "coordinator_epoch", "epoch", "last_timestamp")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=MAX_CACHED_BATCHES)
        self.last_timestamp = -1
        self.coordinator_epoch = -1  # of its last marker; -1: none seen

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    """Kafka's inSequence: next is last + 1, wrapping from 2**31-1 to 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition, with snapshot files in its directory.

    ``check`` is called before an append and ``update`` after it (the Log does the latter
    for every batch it appends or replays). Non-idempotent batches (producer id -1) are
    not tracked.
    """

    def __init__(self, directory: Path, expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction, in first-offset order
        # (offsets only grow, so insertion order is that order)
        self.ongoing: dict[int, int] = {}
        self.map_end_offset = 0  # state reflects every batch below this offset

    def __len__(self) -> int:
        return len(self.producers)

    # -- validation ---------------------------------------------------------------

    def check(self, header: BatchHeader) -> Decision:
        """Decide about an incoming batch (Kafka's duplicate check, then epoch, then sequence).

        An unknown producer id is accepted at any sequence, as Kafka >= 2.5 does (its
        state may have expired or been removed with old segments); a known producer
        with a new epoch must start at sequence 0.
        """
        pid = header.producer_id
        if pid < 0:
            return APPEND
        entry = self.producers.get(pid)
        if entry is None:
            return APPEND
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        last_seq = (first_seq + header.last_offset_delta) & _INT32_MAX
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None and header.is_transactional and not self._in_open_txn(pid, dup):
            # The cached batch's transaction has ended here (its marker is written): a
            # client resolves every batch of a transaction before ending it, so this is
            # no retry of it but a new transaction's batch reusing its sequence (the
            # client took the cached batch for never written). Acknowledging it as a
            # duplicate would commit that transaction without its records; checked as
            # a new batch its sequence is out of order, and the transaction aborts.
            logger.warning("%s: producer %d epoch %d batch %d..%d of a new transaction "
                           "repeats a batch of its ended transaction at offset %d",
                           self.directory, pid, epoch, first_seq, last_seq, dup.base_offset)
            dup = None
        if dup is not None:
            return Decision(
                Verdict.DUPLICATE,
                dup.base_offset,
                dup.last_offset,
                dup.timestamp,
                f"producer {pid} epoch {epoch} batch {first_seq}..{last_seq} already at "
                f"offset {dup.base_offset}",
            )
        if epoch < entry.epoch:
            return Decision(
                Verdict.INVALID_PRODUCER_EPOCH,
                detail=f"producer {pid} epoch {epoch} is older than current epoch {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                return Decision(
                    Verdict.OUT_OF_ORDER_SEQUENCE,
                    detail=f"producer {pid} new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}",
                )
            return APPEND
        if not entry.batches or _in_sequence(entry.last_seq, first_seq):
            return APPEND
        return Decision(
            Verdict.OUT_OF_ORDER_SEQUENCE,
            detail=f"producer {pid} epoch {epoch}: expected sequence "
            f"{(entry.last_seq + 1) & _INT32_MAX}, got {first_seq}",
        )

    def _in_open_txn(self, producer_id: int, batch: BatchMetadata) -> bool:
        """Is ``batch`` (a transactional one of ``producer_id``) part of the producer's
        transaction still open on this partition?"""
        first = self.ongoing.get(producer_id)
        return first is not None and batch.base_offset >= first

    def update(self, header: BatchHeader, base_offset: int, now_ms: int = -1,
               coordinator_epoch: int = -1) -> None:
        """Record an appended (or replayed) batch at ``base_offset``.

        ``now_ms`` (wall clock of the append) drives expiration; record timestamps are
        client-chosen and may be years old, which would expire a live producer.
        ``coordinator_epoch``: a marker's (its control record value).
        """
        next_offset = base_offset + header.last_offset_delta + 1
        if next_offset > self.map_end_offset:
            self.map_end_offset = next_offset
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        epoch = header.producer_epoch
        if header.is_transactional:
            if header.is_control:
                self.ongoing.pop(pid, None)
            elif pid not in self.ongoing:
                self.ongoing[pid] = base_offset
        if header.is_control:
            # A transaction marker (written by the coordinator, sequence -1) ends a
            # transaction; with a newer epoch it fences the producer's older epochs.
            # Its coordinator epoch fences older coordinators (checked before the append).
            if entry is None:
                entry = self.producers[pid] = ProducerEntry(epoch)
            elif epoch > entry.epoch:
                entry.epoch = epoch
                entry.batches.clear()
            if header.is_transactional:
                entry.coordinator_epoch = coordinator_epoch
            if now_ms > entry.last_timestamp:
                entry.last_timestamp = now_ms
            return
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        elif epoch != entry.epoch:
            if epoch < entry.epoch:
                # Only replay can get here (check refuses it): keep the newer epoch.
                logger.warning(
                    "%s: producer %d epoch %d batch at offset %d follows epoch %d",
                    self.directory,
                    pid,
                    epoch,
                    base_offset,
                    entry.epoch,
                )
            entry.epoch = epoch
            entry.batches.clear()
        first_seq = header.base_sequence
        timestamp = header.max_timestamp
        entry.batches.append(
            BatchMetadata(
                first_seq,
                (first_seq + header.last_offset_delta) & _INT32_MAX,
                base_offset,
                next_offset - 1,
                timestamp,
            )
        )
        seen = now_ms if now_ms >= 0 else timestamp
        if seen > entry.last_timestamp:
            entry.last_timestamp = seen

    def replay(self, batches: Iterable[tuple[BatchHeader, int]], now_ms: int) -> int:
        """Rebuild state from batches already in the log, each as (header, coordinator
        epoch of a marker, else -1); returns how many were read.

        Replayed producers count as seen at ``now_ms`` (the restart), never expiring early.
        """
        count = 0
        for header, coordinator_epoch in batches:
            self.update(header, header.base_offset, now_ms, coordinator_epoch)
            count += 1
        return count

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of ``producer_id``'s last marker here, -1 if none."""
        entry = self.producers.get(producer_id)
        return -1 if entry is None else entry.coordinator_epoch

    # -- transactions ----------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, or the high watermark."""
        for first in self.ongoing.values():
            return min(first, high_watermark)
        return high_watermark

    def abort_entry(self, producer_id: int, marker_offset: int) -> tuple[int, int] | None:
        """For an abort marker about to close ``producer_id``'s transaction: (first
        offset of the transaction, LSO once it is closed), or None if none is open."""
        first = self.ongoing.get(producer_id)
        if first is None:
            return None
        for pid, other in self.ongoing.items():
            if pid != producer_id:
                return first, other
        return first, marker_offset + 1

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (wall clock);
        never one with an open transaction (as Kafka)."""
        horizon = now_ms - self.expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if e.last_timestamp < horizon and pid not in self.ongoing]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def reset(self, offset: int = 0) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = offset

    # -- snapshots -------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = []
        for path in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            with contextlib.suppress(ValueError):
                offsets.append(int(path.name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def take_snapshot(self, *, sync: bool = False, keep: int = 2) -> Path:
        """Write state as of ``map_end_offset`` atomically (tmp + rename); keep the newest few.

        ``sync`` fsyncs file and directory (clean close); snapshots taken on roll skip it
        to keep fsync off the event loop: a lost one only means a longer replay.
        """
        offset = self.map_end_offset
        parts: list[bytes] = []
        for pid, entry in self.producers.items():
            parts.append(_PRODUCER.pack(pid, entry.epoch, len(entry.batches), entry.last_timestamp,
                                        entry.coordinator_epoch))
            parts.extend(_BATCH.pack(*meta) for meta in entry.batches)
        parts.append(_TXN_COUNT.pack(len(self.ongoing)))
        parts.extend(_TXN.pack(pid, first) for pid, first in self.ongoing.items())
        body = b"".join(parts)
        data = _FILE_HEADER.pack(_MAGIC, _VERSION, zlib.crc32(body), len(self.producers)) + body
        path = self.directory / snapshot_file_name(offset)
        atomic_write(path, data, sync=sync)
        for old in self.snapshot_offsets()[:-keep]:
            self._delete_snapshot(old)
        return path

    def load_latest_snapshot(self, max_offset: int, at_most: int | None = None) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; returns its offset.

        Snapshots above ``max_offset`` (after a truncation) and unreadable ones are
        deleted, falling back to older ones; None means replay from the log start.
        ``at_most`` passes over (keeping) the ones above it: the replay must start there
        (a transaction index to rebuild from that offset).
        """
        self.reset()
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                self._delete_snapshot(offset)
                continue
            if at_most is not None and offset > at_most:
                continue
            path = self.directory / snapshot_file_name(offset)
            try:
                self._read_snapshot(path)
            except _OldSnapshotError:
                logger.info("%s: snapshot of an older format (no transaction state or coordinator epochs), replaying instead", path)
                self.reset()
                continue
            except (OSError, ValueError, struct.error) as exc:
                logger.warning("%s: ignoring unreadable producer snapshot: %s", path, exc)
                self._delete_snapshot(offset)
                self.reset()
                continue
            self.map_end_offset = offset
            return offset
        return None

    def _read_snapshot(self, path: Path) -> None:
        data = path.read_bytes()
        magic, version, crc, count = _FILE_HEADER.unpack_from(data, 0)
        body = memoryview(data)[_FILE_HEADER.size :]
        if magic == _MAGIC and version in (1, 2):
            raise _OldSnapshotError(path)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError(f"bad magic/version {magic!r}/{version}")
        if zlib.crc32(body) != crc:
            raise ValueError("CRC mismatch")
        pos = 0
        producers: dict[int, ProducerEntry] = {}
        for _ in range(count):
            pid, epoch, nbatches, last_ts, coordinator_epoch = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            entry = ProducerEntry(epoch)
            entry.last_timestamp = last_ts
            entry.coordinator_epoch = coordinator_epoch
            for _ in range(nbatches):
                entry.batches.append(BatchMetadata._make(_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            producers[pid] = entry
        (txns,) = _TXN_COUNT.unpack_from(body, pos)
        pos += _TXN_COUNT.size
        ongoing = []
        for _ in range(txns):
            ongoing.append(_TXN.unpack_from(body, pos))
            pos += _TXN.size
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} trailing bytes")
        self.producers = producers
        self.ongoing = dict(sorted(ongoing, key=lambda txn: txn[1]))

    def delete_snapshots_after(self, offset: int) -> None:
        for old in self.snapshot_offsets():
            if old > offset:
                self._delete_snapshot(old)

    def _delete_snapshot(self, offset: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / snapshot_file_name(offset)).unlink()
