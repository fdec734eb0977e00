"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

Kafka's cleaner, one log at a time on a storage worker thread. A pass maps the dirty
part of the log (from the first offset not yet cleaned to the log end, the active
segment included) into a bounded ``OffsetMap`` (key hash -> latest offset), then
rewrites the closed segments below the end of what the map covers, dropping every
record a later record of the same key supersedes. When the map fills before the log
end, the pass cleans up to the last mapped offset and the next pass goes on from there,
so any ``log.cleaner.dedupe.buffer.size`` gives the same result, just in more passes.
The active segment is never rewritten (its records are mapped, and mapped again once it
has rolled). Tombstones (null value) are kept for ``delete.retention.ms`` after their
batch's max timestamp, so consumers that lag learn of the deletion, then go.

Every batch keeps its base offset, last offset delta, timestamps and producer fields;
only its records (and record count) shrink, and a batch left with no record stays as an
empty batch (as Kafka keeps them). So offsets stay dense at batch level (recovery and
the offline check see an ordinary log), producer state replays unchanged, and records
keep their original offsets (consumers see gaps, as with Kafka compaction).

Segments are streamed batch by batch: a segment is copied to ``<base>.log.cleaned`` from
its first changed batch on (the unchanged prefix by ``copy_file_range``), fsynced with
its rebuilt indexes, and swapped in by ``LocalLog.replace_segments``; readers of the old
segment keep it until they release it. A crash before the swap leaves ``.cleaned`` files
that the next start-up deletes. A batch that does not decode is kept as it is, logged and
counted (``bad_batches``); it never stops the cleaning of anything else.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import sys
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    MAGIC_V2,
    MIN_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Compression,
    CorruptBatchError,
    parse_header,
)
from kafkaproto.compression import compress
from kafkaproto.crc import crc32c
from kafkaproto.records import Record, _encode_record, decode_batch
from logserver.log.fsutil import fsync_path
from logserver.log.index import index_file_name
from logserver.log.local_log import SegmentsChangedError
from logserver.log.offset_map import DEFAULT_DEDUPE_BUFFER_BYTES, OffsetMap
from logserver.log.segment import CLEANED_SUFFIX, LOG_SUFFIX, Segment
from logserver.log.transaction_index import TXN_INDEX_SUFFIX

if TYPE_CHECKING:
    from logserver.log.log import Log

logger = logging.getLogger(__name__)

__all__ = ["Cleaner", "compact"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_READ_CHUNK = 1 << 20
# The cleaner is pure Python on a thread, so the event loop competes with it for the GIL:
# after each batch it sleeps this long (handing the GIL over if the loop waits for it),
# and while it runs the interpreter switches threads every 1 ms instead of every 5 ms,
# which bounds each wait of the loop at every wake-up.
_YIELD_S = 0.0002
_SWITCH_INTERVAL_S = 0.001


@dataclass
class _LogState:
    first_dirty: int = 0  # every offset below it is cleaned (at most one record per key)
    marker: tuple[int, int, int] | None = None  # (LEO, log start, tombstone epoch) at the last pass


class _Aborted(Exception):
    """The cleaner was told to stop (the manager is closing)."""


class Cleaner:
    """Compacts logs on the calling thread, remembering how far each one is clean."""

    def __init__(self, dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES) -> None:
        self.offset_map = OffsetMap(dedupe_buffer_bytes)
        self._states: weakref.WeakKeyDictionary[Log, _LogState] = weakref.WeakKeyDictionary()
        self.bad_batches = 0  # batches kept undecoded since start
        self.passes = 0
        self._aborted = False

    def abort(self) -> None:
        """Stop a running pass at the next batch (its unfinished copy is discarded)."""
        self._aborted = True

    def _pause(self) -> None:
        if self._aborted:
            raise _Aborted
        time.sleep(_YIELD_S)

    def needs_cleaning(self, log: Log, delete_retention_ms: int, now_ms: int) -> bool:
        """Whether a pass over ``log`` has work (cheap: no file is read).

        A closed segment not cleaned yet (none cleaned since start, one rolled since the
        last pass, or a pass whose key map filled up), a pass that was abandoned, or
        tombstones that may have passed ``delete_retention_ms`` since the last pass.
        """
        local = log.local
        segments = local.segments
        if len(segments) < 2:
            return False
        state = self._states.get(log)
        if state is None or state.marker is None:
            return True
        if segments[-1].base_offset > max(state.first_dirty, local.log_start_offset):
            return True
        return state.marker[2] != now_ms // max(delete_retention_ms, 1)

    def clean(self, log: Log, delete_retention_ms: int, now_ms: int | None = None) -> int:
        """Compact ``log``'s closed segments; returns the bytes removed (0: nothing to do)."""
        previous = sys.getswitchinterval()
        sys.setswitchinterval(min(previous, _SWITCH_INTERVAL_S))
        try:
            return self._clean(log, delete_retention_ms, now_ms)
        finally:
            sys.setswitchinterval(previous)

    def _clean(self, log: Log, delete_retention_ms: int, now_ms: int | None) -> int:
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        local = log.local
        state = self._states.setdefault(log, _LogState())
        marker = (local.log_end_offset, local.log_start_offset, now // max(delete_retention_ms, 1))
        if state.marker == marker or len(local.segments) < 2:
            return 0  # nothing appended, deleted or expired since the last pass
        horizon = now - delete_retention_ms
        first_dirty = max(state.first_dirty, local.log_start_offset)
        removed = 0
        while True:
            with local.pinned_segments() as segments:
                if len(segments) < 2:
                    break
                end = segments[-1].next_offset
                try:
                    map_end = self._build_map(log, segments, first_dirty, end)
                except _Aborted:
                    return removed
                self.passes += 1
                try:
                    removed += self._clean_closed(log, segments[:-1], map_end, horizon)
                except (SegmentsChangedError, _Aborted) as exc:
                    logger.info("%s: compaction pass abandoned: %s", log.directory,
                                exc or "stopping")
                    state.marker = None
                    return removed
                uncleanable = segments[-1].base_offset
            progressed = map_end > first_dirty
            first_dirty = max(first_dirty, min(map_end, uncleanable))
            if map_end >= uncleanable or not progressed:
                break  # every closed segment was cleaned against the whole dirty part
        state.first_dirty = first_dirty
        state.marker = marker
        if removed:
            logger.info("%s: compaction removed %d bytes", log.directory, removed)
        return removed

    # -- mapping --------------------------------------------------------------------

    def _build_map(self, log: Log, segments: tuple[Segment, ...], first_dirty: int,
                   end: int) -> int:
        """Map keys from ``first_dirty`` on until the map fills; returns the end covered."""
        offset_map = self.offset_map
        offset_map.clear()
        covered = first_dirty
        for seg in segments:
            if seg.next_offset <= first_dirty:
                continue
            try:
                for _, header, data in _iter_batches(seg):
                    if header.next_offset <= first_dirty:
                        continue
                    self._pause()
                    if header.base_offset >= end:
                        return covered
                    # Transactional records never supersede others: an aborted one must
                    # not remove a committed value (Kafka's cleaner drops aborted records;
                    # this one keeps more instead).
                    if header.record_count and not header.attributes & (CONTROL_MASK | TRANSACTIONAL_MASK):
                        if len(offset_map) and not offset_map.has_room_for(header.record_count):
                            return covered  # full: clean up to here, map the rest next pass
                        records = self._decode(log, seg, header, data)
                        for record in records or ():
                            if record.key is not None:
                                offset_map.put(record.key, record.offset)
                    covered = header.next_offset
            except CorruptBatchError as exc:
                self._bad(log, seg, exc)
                return covered
        return covered

    def _decode(self, log: Log, seg: Segment, header: BatchHeader,
                data: bytes | memoryview) -> list[Record] | None:
        try:
            return decode_batch(data, verify_crc=False,
                                max_uncompressed_bytes=log.config.max_message_bytes)[1]
        except (CorruptBatchError, ValueError) as exc:
            self._bad(log, seg, exc, header)
            return None

    def _bad(self, log: Log, seg: Segment, exc: Exception, header: BatchHeader | None = None) -> None:
        self.bad_batches += 1
        where = f"batch at offset {header.base_offset}" if header else "a batch header"
        logger.warning("%s: compaction keeps %s of segment %d as it is: %s",
                       log.directory, where, seg.base_offset, exc)

    # -- cleaning -------------------------------------------------------------------

    def _clean_closed(self, log: Log, closed: tuple[Segment, ...], map_end: int,
                      horizon: int) -> int:
        removed = 0
        for seg in closed:
            if seg.base_offset >= map_end:
                break
            new = self._clean_segment(log, seg, map_end, horizon)
            if new is None:
                continue
            try:
                log.local.replace_segments([seg], [new])
            except BaseException:
                new.delete()
                raise
            removed += seg.size - new.size
        return removed

    def _retain(self, record: Record, header: BatchHeader, map_end: int, horizon: int) -> bool:
        if record.key is None or record.offset >= map_end:
            return True  # keyless, or beyond what this pass mapped (Kafka's pastLatestOffset)
        if self.offset_map.get(record.key) > record.offset:
            return False  # a later record of the same key exists
        return record.value is not None or header.max_timestamp >= horizon

    def _clean_segment(self, log: Log, seg: Segment, map_end: int, horizon: int) -> Segment | None:
        """Write the cleaned copy of ``seg`` (pinned); None if no record goes."""
        copy: _CleanedCopy | None = None
        try:
            for position, header, data in _iter_batches(seg):
                self._pause()
                out: bytes | memoryview = data
                if header.record_count and not header.attributes & CONTROL_MASK:
                    records = self._decode(log, seg, header, data)
                    if records is not None:
                        kept = [r for r in records if self._retain(r, header, map_end, horizon)]
                        if len(kept) != len(records):
                            out = _encode(header, kept)
                if copy is None:
                    if out is data:
                        continue
                    copy = _CleanedCopy(seg)
                    copy.copy_prefix(seg, position)
                copy.write(out)
            if copy is None:
                return None
            return copy.finish(log)
        except CorruptBatchError as exc:  # a bad header: the rest cannot be walked
            if copy is not None:
                copy.discard()
            self._bad(log, seg, exc)
            return None
        except BaseException:
            if copy is not None:
                copy.discard()
            raise


def compact(log: Log, delete_retention_ms: int, now_ms: int | None = None, *,
            dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES) -> int:
    """One-off compaction with a fresh Cleaner (tools and tests; the server keeps one)."""
    return Cleaner(dedupe_buffer_bytes).clean(log, delete_retention_ms, now_ms)


def _iter_batches(seg: Segment) -> Iterator[tuple[int, BatchHeader, bytes | memoryview]]:
    """(position, header, bytes) of every batch of a pinned segment, read in 1 MiB chunks.

    Only up to the size at the start (appends to an active segment are not waited for);
    memory stays within one chunk or one batch. Raises CorruptBatchError on a bad header.
    """
    end = seg.size
    position = 0
    buf = b""
    buf_pos = 0
    while position + BATCH_HEADER_SIZE <= end:
        off = position - buf_pos
        if off + BATCH_HEADER_SIZE > len(buf):
            buf, buf_pos, off = seg.read_at(position, min(_READ_CHUNK, end - position)), position, 0
        header = parse_header(buf, off)
        size = header.size
        if off + size > len(buf):
            if size > _READ_CHUNK:
                data: bytes | memoryview = seg.read_at(position, size)
                if len(data) < size:
                    raise CorruptBatchError(f"batch at position {position} is truncated")
                yield position, header, data
                position += size
                continue
            buf, buf_pos, off = seg.read_at(position, min(_READ_CHUNK, end - position)), position, 0
            if size > len(buf):
                raise CorruptBatchError(f"batch at position {position} is truncated")
        yield position, header, memoryview(buf)[off : off + size]
        position += size


class _CleanedCopy:
    """``<base>.log.cleaned`` being written: the unchanged prefix, then batch by batch."""

    def __init__(self, seg: Segment) -> None:
        self.directory = seg.directory
        self.base_offset = seg.base_offset
        self.source = seg
        self.path = seg.directory / (index_file_name(seg.base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0

    def copy_prefix(self, seg: Segment, length: int) -> None:
        """The first ``length`` bytes of ``seg`` unchanged, copied by the kernel."""
        copied = 0
        while copied < length:
            n = os.copy_file_range(seg.fd, self.fd, length - copied, copied, copied)
            if n <= 0:
                raise OSError(f"{seg.path}: ended at {copied} of {length} bytes while copying")
            copied += n
        self.size = length

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.size)
            self.size += n
            view = view[n:]

    def finish(self, log: Log) -> Segment:
        """fsync, close, and open the copy as a segment with rebuilt, synced indexes."""
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        # Markers are kept as they are (at their offsets), so the aborted transactions
        # of the copy are exactly the source's.
        txn_path = self.directory / (index_file_name(self.base_offset, TXN_INDEX_SUFFIX)
                                     + CLEANED_SUFFIX)
        self.source.txn_index.copy_to(txn_path)
        new = Segment(self.directory, self.base_offset, log.config, active=False,
                      file_suffix=CLEANED_SUFFIX)
        try:
            new.recover(verify_from=None)
            fsync_path(new.offset_index.path)
            fsync_path(new.time_index.path)
            new.txn_index.fsync()
        except BaseException:
            new.delete()
            raise
        return new

    def discard(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _encode(header: BatchHeader, records: list[Record]) -> bytes:
    """A batch with ``header``'s offsets, timestamps and producer fields and ``records``."""
    log_append = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    payload = b"".join(
        _encode_record(r.offset - header.base_offset,
                       0 if log_append else r.timestamp - header.base_timestamp,
                       r.key, r.value, r.headers)
        for r in records
    )
    attributes = header.attributes
    codec = Compression(attributes & COMPRESSION_MASK)
    if not records:
        attributes &= ~COMPRESSION_MASK
    elif codec:
        payload = compress(codec, payload)
    out = bytearray(_HEADER.pack(
        header.base_offset, MIN_LENGTH + len(payload), header.partition_leader_epoch, MAGIC_V2,
        0, attributes, header.last_offset_delta, header.base_timestamp, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, len(records)))
    out += payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    assert len(out) >= BATCH_HEADER_SIZE
    return bytes(out)
