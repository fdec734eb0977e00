"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

Only closed segments are rewritten (never the active one); the key map covers the whole
log, active segment included, so a record is dropped as soon as a later record with the
same key exists anywhere. Tombstones (null value) are kept for ``delete.retention.ms``
after their batch's max timestamp, so consumers that lag learn of the deletion, then go.

Every batch keeps its base offset, last offset delta, timestamps and producer fields; only
its records (and record count) shrink, and a batch left with no record stays as an empty
batch (as Kafka keeps them). So offsets stay dense at batch level (recovery and the
offline check see an ordinary log), producer state replays unchanged, and records keep
their original offsets (consumers see gaps, as with Kafka compaction).

A segment is rewritten to ``<base>.log.cleaned`` (fsynced), then swapped in with a rename;
its indexes are rebuilt. A crash before the rename leaves a ``.cleaned`` file that the
next start-up deletes; after it, the indexes are missing and are rebuilt at start-up.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from typing import TYPE_CHECKING

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    MAGIC_V2,
    MIN_LENGTH,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Compression,
)
from kafkaproto.compression import compress
from kafkaproto.records import Record, _encode_record, decode_batch
from logserver.log.fsutil import fsync_dir
from logserver.log.segment import Segment

if TYPE_CHECKING:
    from logserver.log.log import Log

logger = logging.getLogger(__name__)

__all__ = ["compact"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CLEANED_SUFFIX = ".cleaned"


def compact(log: Log, delete_retention_ms: int, now_ms: int | None = None) -> int:
    """Compact ``log``'s closed segments; returns the bytes removed (0 if nothing to do)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if len(log.segments) < 2:
        return 0
    marker = (log.log_end_offset, log.log_start_offset, now // max(delete_retention_ms, 1))
    if getattr(log, "_cleaner_state", None) == marker:
        return 0  # nothing appended, deleted or expired since the last pass
    latest = _latest_offsets(log)
    horizon = now - delete_retention_ms
    removed = 0
    for index in range(len(log.segments) - 1):
        seg = log.segments[index]
        rewritten = _rewrite(seg, latest, horizon)
        if rewritten is None:
            continue
        removed += seg.size - len(rewritten)
        _swap(log, index, rewritten)
    log._cleaner_state = marker  # type: ignore[attr-defined]
    if removed:
        logger.info("%s: compaction removed %d bytes", log.directory, removed)
    return removed


def _batches(seg: Segment):  # type: ignore[no-untyped-def]
    for position, header in seg.iter_headers():
        data = os.pread(seg.fd, header.size, position)
        yield data, header


def _latest_offsets(log: Log) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in log.segments:
        for data, header in _batches(seg):
            if header.attributes & CONTROL_MASK or not header.record_count:
                continue
            _, records = decode_batch(data, verify_crc=False)
            for record in records:
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def _rewrite(seg: Segment, latest: dict[bytes, int], horizon: int) -> bytes | None:
    """The segment's new bytes, or None if no record goes."""
    out: list[bytes] = []
    changed = False
    for data, header in _batches(seg):
        if header.attributes & CONTROL_MASK or not header.record_count:
            out.append(data)
            continue
        _, records = decode_batch(data, verify_crc=False)
        keep = [
            r for r in records
            if r.key is None
            or (latest.get(r.key) == r.offset
                and not (r.value is None and header.max_timestamp < horizon))
        ]
        if len(keep) == len(records):
            out.append(data)
        else:
            changed = True
            out.append(_encode(header, keep))
    return b"".join(out) if changed else None


def _encode(header: BatchHeader, records: list[Record]) -> bytes:
    """A batch with ``header``'s offsets, timestamps and producer fields and ``records``."""
    from crc32c import crc32c

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


def _swap(log: Log, index: int, data: bytes) -> None:
    old = log.segments[index]
    cleaned = old.path.with_name(old.path.name + _CLEANED_SUFFIX)
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    with log._lock:
        # In-flight sendfiles keep reading the old inode through old.fd (closed later).
        old.offset_index.delete()
        old.time_index.delete()
        os.replace(cleaned, old.path)
        new = Segment(log.directory, old.base_offset, log.config, active=False)
        new.recover(verify_from=None)
        log.segments[index] = new
        log._unflushed.pop(old, None)
        log._unflushed[new] = None
        log._dir_dirty = True
        log._retired.append((time.monotonic(), old))
    fsync_dir(log.directory)
