"""Open and aborted transactions of a partition held in memory (the in-memory storage
engine's; the segment log keeps them as Kafka does: open transactions in its producer
state, aborted ones in each segment's ``.txnindex``, see logserver.log.transaction_index),
and the control record decoding both use.

A transactional data batch opens a transaction for its producer id at its base offset
(if none is open); a control batch (commit or abort marker) closes it, and an abort adds
``(producer id, first offset, marker offset)`` to the aborted list. The last stable
offset (LSO) is the first offset of the oldest open transaction, or the high watermark."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import NamedTuple

from kafkaproto.batch import BatchHeader

__all__ = ["CONTROL_KEY_SIZE", "CONTROL_RECORD_SIZE", "AbortedTxn", "PartitionTxns",
           "control_coordinator_epoch", "control_type"]

# A control record: varint length, attributes, timestamp delta, offset delta, key length
# (one byte each for a marker), then the key: int16 version, int16 type (0 abort, 1 commit).
CONTROL_KEY_SIZE = 9
# ... then the value length and the value: int16 version, int32 coordinator epoch.
CONTROL_RECORD_SIZE = 16
ABORT, COMMIT = 0, 1


def control_type(first_record: bytes) -> int:
    """The type of an uncompressed control batch, from the first bytes of its records
    (-1 when they are not the one-byte-varint layout every marker has)."""
    if len(first_record) < CONTROL_KEY_SIZE or first_record[4] != 8:  # key length 4
        return -1
    return int.from_bytes(first_record[7:9], "big", signed=True)


def control_coordinator_epoch(first_record: bytes) -> int:
    """The coordinator epoch a marker carries (Kafka's EndTransactionMarker value), from
    the first ``CONTROL_RECORD_SIZE`` bytes of its records; -1 when not a marker's layout."""
    if len(first_record) < CONTROL_RECORD_SIZE or first_record[4] != 8 \
            or first_record[9] != 12:  # key length 4, value length 6
        return -1
    return int.from_bytes(first_record[12:16], "big", signed=True)


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the abort marker


class PartitionTxns:
    """Transactions seen in one partition's log, fed batch by batch in offset order."""

    __slots__ = ("_aborted", "_aborted_last", "ongoing")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self._aborted: list[AbortedTxn] = []  # by marker offset
        self._aborted_last: list[int] = []

    def rebuild(self, batches: Iterable[tuple[BatchHeader, bool | None]]) -> None:
        """From (header, commit) of every transactional batch in offset order; commit is
        None for data batches."""
        self.ongoing.clear()
        self._aborted.clear()
        self._aborted_last.clear()
        for header, commit in batches:
            self.on_batch(header, header.base_offset, commit)

    def on_batch(self, header: BatchHeader, base_offset: int, commit: bool | None = None) -> None:
        if not header.is_transactional:
            return
        pid = header.producer_id
        if header.is_control:
            self.on_marker(pid, base_offset, commit=bool(commit))
        elif pid not in self.ongoing:
            self.ongoing[pid] = base_offset

    def on_marker(self, producer_id: int, marker_offset: int, *, commit: bool) -> None:
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self._aborted.append(AbortedTxn(producer_id, first, marker_offset))
            self._aborted_last.append(marker_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        if not self.ongoing:
            return high_watermark
        return min(min(self.ongoing.values()), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap [start, end): what a read_committed fetch of
        that range must be told about (Kafka's collectAbortedTxns)."""
        i = bisect.bisect_left(self._aborted_last, start)
        return [a for a in self._aborted[i:] if a.first_offset < end]

    def forget_below(self, offset: int) -> None:
        """Drop aborted entries wholly below the log start (after retention)."""
        i = bisect.bisect_left(self._aborted_last, offset)
        if i:
            del self._aborted[:i]
            del self._aborted_last[:i]
