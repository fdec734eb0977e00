"""Reading an internal topic's partition back from its log start: the replay the group
coordinator (``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``) do when they load their state.

Both topics hold small records in uncompressed batches written by this server; control
batches are skipped (``replay_entries`` yields them as markers, with each record's
producer id, for the group coordinator's transactional offsets), a batch that does not
decode is reported (``on_bad``) and skipped, never a crash, and a read that makes no
progress ends the replay.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from kafkaproto.batch import CONTROL_MASK, TRANSACTIONAL_MASK, CorruptBatchError, iter_batches
from kafkaproto.control import COMMIT
from kafkaproto.records import Record, decode_batch
from logserver.storage.api import Storage

log = logging.getLogger(__name__)

__all__ = ["ReplayedEntry", "replay_entries", "replay_partition"]

_CONTROL_KEY = struct.Struct(">hh")


class ReplayedEntry(NamedTuple):
    """A record with its batch's producer id and transactional bit; for a transaction
    marker ``marker`` is True (commit) or False (abort), else None."""

    record: Record
    producer_id: int
    transactional: bool
    marker: bool | None

READ_CHUNK = 1 << 20
# Internal records are small; a batch inflating past this is refused, not allocated.
MAX_UNCOMPRESSED = 16 << 20


def replay_partition(storage: Storage, topic: str, partition: int, *,
                     on_bad: Callable[[int, CorruptBatchError], None] | None = None,
                     to_log_end: bool = False) -> Iterator[Record]:
    """Every record of ``topic``-``partition`` from its log start to its high watermark
    (or, ``to_log_end``, its log end: a new partition leader's whole log is the
    partition's now, though its high watermark may still lag what the old leader
    acknowledged), in offset order; ``on_bad(base offset, error)`` is told of each
    unreadable batch."""
    for entry in replay_entries(storage, topic, partition, on_bad=on_bad,
                                to_log_end=to_log_end):
        if entry.marker is None:
            yield entry.record


def replay_entries(storage: Storage, topic: str, partition: int, *,
                   on_bad: Callable[[int, CorruptBatchError], None] | None = None,
                   to_log_end: bool = False) -> Iterator[ReplayedEntry]:
    """``replay_partition``'s records with their batch's producer id and transactional
    bit, and the transaction markers among them (other control records are skipped)."""
    offset = storage.log_start_offset(topic, partition)
    if offset is None:
        return
    end = storage.log_end_offset if to_log_end else storage.high_watermark
    while offset < (end(topic, partition) or 0):
        data = storage.read_bytes(topic, partition, offset, READ_CHUNK)
        if data is None:
            return
        next_offset = offset
        for pos, header in iter_batches(data):
            next_offset = header.next_offset
            control = bool(header.attributes & CONTROL_MASK)
            transactional = bool(header.attributes & TRANSACTIONAL_MASK)
            if control and not transactional:
                continue
            try:
                _, records = decode_batch(data, pos, verify_crc=False,
                                          max_uncompressed_bytes=MAX_UNCOMPRESSED)
            except CorruptBatchError as exc:
                log.error("%s-%d: skipping unreadable batch at offset %d: %s",
                          topic, partition, header.base_offset, exc)
                if on_bad is not None:
                    on_bad(header.base_offset, exc)
                continue
            for record in records:
                if record.offset < offset:
                    continue
                marker = None
                if control:
                    if record.key is None or len(record.key) < _CONTROL_KEY.size:
                        continue
                    marker = _CONTROL_KEY.unpack_from(record.key)[1] == COMMIT
                yield ReplayedEntry(record, header.producer_id, transactional, marker)
        if next_offset <= offset:
            log.error("%s-%d: no progress reading at offset %d; stopping the replay",
                      topic, partition, offset)
            return
        offset = next_offset
