"""Produce of transactional batches: only into partitions of the producer's open
transaction, with its current producer id and epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from kafkaproto.batch import BATCH_HEADER_SIZE, TRANSACTIONAL_MASK

if TYPE_CHECKING:
    from logserver.services import BrokerServices

_ATTRIBUTES = 21
_PRODUCER_ID = 43
_PRODUCER_EPOCH = 51


def is_transactional(records: memoryview | None) -> bool:
    """Does this partition's data start with a transactional batch (Kafka looks at the first
    batch of each partition to decide whether a Produce is transactional)?"""
    return (records is not None and len(records) >= BATCH_HEADER_SIZE
            and bool(records[_ATTRIBUTES + 1] & TRANSACTIONAL_MASK))


def transactional_produce_error(broker: BrokerServices, transactional_id: str | None, topic: str,
                                partition: int, records: memoryview | None) -> int:
    """An error code for a transactional batch that may not be appended, else NONE (0).

    Malformed batches are left to the partition's validation (CORRUPT_MESSAGE)."""
    if not is_transactional(records):
        return ErrorCode.NONE
    assert records is not None
    if transactional_id is None:
        return ErrorCode.INVALID_TXN_STATE  # a transactional batch needs its transactional id
    if not broker.routing.coordinates_transactions(transactional_id):  # cluster mode: another broker's
        return ErrorCode.NONE
    producer_id = int.from_bytes(records[_PRODUCER_ID:_PRODUCER_ID + 8], "big", signed=True)
    epoch = int.from_bytes(records[_PRODUCER_EPOCH:_PRODUCER_EPOCH + 2], "big", signed=True)
    return broker.transactions.check_produce(transactional_id, producer_id, epoch, topic, partition)
