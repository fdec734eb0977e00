"""Records for the REST Proxy's reads, as a Kafka consumer would take them from Fetch.

read_uncommitted reads up to the high watermark; read_committed (a consumer instance's
``isolation.level``) stops at the last stable offset and drops the records of aborted
transactions with the storage's aborted-transaction index, as Fetch hands it to a client
(KIP-98). Control records are never shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkaproto.batch import Buffer, iter_batches
from kafkaproto.records import Record, decode_batch

if TYPE_CHECKING:
    from logserver.services import BrokerServices

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


def read_records(broker: BrokerServices, topic: str, partition: int, offset: int, max_bytes: int,
                 committed: bool = False) -> list[Record]:
    """Records from ``offset``, about ``max_bytes`` of them (at least one batch, as
    Fetch with KIP-74)."""
    storage = broker.storage
    end = storage.high_watermark(topic, partition)
    if end is not None and committed:
        stable = storage.last_stable_offset(topic, partition, fetch_offset=offset)
        end = end if stable is None else min(end, stable)
    if end is None or offset >= end:
        return []
    data = storage.read_bytes(topic, partition, offset, max(max_bytes, 1))
    if not data:
        return []
    aborted = storage.aborted_transactions(topic, partition, offset, end) if committed else []
    return records_of(data, offset, end, aborted, broker.config["fetch.max.bytes"])


def records_of(data: Buffer, offset: int, end: int, aborted: Iterable[tuple[int, int]],
               limit: int) -> list[Record]:
    """The records in ``offset`` up to ``end`` of fetched batches, without control records
    and without the batches of ``aborted`` transactions ((producer id, first offset), as
    Fetch's aborted_transactions; empty for read_uncommitted)."""
    # Aborted transactions starting at or before each batch: their producers' batches are
    # dropped until that producer's abort marker (a client's read_committed filter).
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    found: list[Record] = []
    for pos, header in iter_batches(data):
        if header.base_offset >= end:
            break
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        if header.is_control:
            aborting.discard(header.producer_id)  # the marker ends its transaction
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        _, records = decode_batch(data, pos, max_uncompressed_bytes=limit)
        found += [r for r in records if offset <= r.offset < end]
    return found
