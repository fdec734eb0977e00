"""Leader epochs read back from the log: the end offset of an epoch (KIP-101/KIP-279).

Every batch a leader appends carries its leader epoch, and epochs never go down along
the log, so the end offset of epoch E (the first offset of a later epoch, or the log
end) is found by a binary search over the batches, a few batch-header reads, instead of
a separate epoch cache file. An epoch that wrote nothing starts and ends at the same
offset, so leaving it out gives the same answers as Kafka's cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto.batch import parse_header

if TYPE_CHECKING:
    from logserver.storage.api import Storage

UNDEFINED = (-1, -1)


def _batch_at(storage: Storage, topic: str, partition: int, offset: int) -> tuple[int, int, int]:
    """(base offset, leader epoch, next offset) of the batch holding ``offset``."""
    data = storage.read_bytes(topic, partition, offset, 1)
    if not data:
        raise LookupError(f"{topic}-{partition}: no batch at {offset}")
    header = parse_header(data)
    return header.base_offset, header.partition_leader_epoch, \
        header.base_offset + header.last_offset_delta + 1


def last_epoch(storage: Storage, topic: str, partition: int) -> int | None:
    """The epoch of the last batch in the log; None for an empty log."""
    start = storage.log_start_offset(topic, partition)
    end = storage.log_end_offset(topic, partition)
    if start is None or end is None or end <= start:
        return None
    return _batch_at(storage, topic, partition, end - 1)[1]


def end_offset_for_epoch(storage: Storage, topic: str, partition: int,
                         epoch: int) -> tuple[int, int]:
    """(largest epoch <= ``epoch`` in the log, the offset where it ends), or
    UNDEFINED when every batch has a larger epoch (or there is none)."""
    start = storage.log_start_offset(topic, partition)
    end = storage.log_end_offset(topic, partition)
    if start is None or end is None or end <= start:
        return UNDEFINED
    low, high = start, end  # the first offset of an epoch above ``epoch`` is in [low, high]
    while low < high:
        base, batch_epoch, next_offset = _batch_at(storage, topic, partition, (low + high) // 2)
        if batch_epoch > epoch:
            high = base
        else:
            low = next_offset
    if low <= start:
        return UNDEFINED
    return _batch_at(storage, topic, partition, low - 1)[1], low
