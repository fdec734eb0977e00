"""Who wrote each record of the idempotent topic: producer id, epoch and sequence, read
from the batch headers of the final log (Fetch on the wire; a consumer library does not
show them).

The checker needs them to tell a duplicate the broker made (the same producer epoch
and sequence stored twice: its deduplication failed) from one the client made: librdkafka
bumps an idempotent producer's epoch when a batch after its first unacknowledged one is
answered OUT_OF_ORDER_SEQUENCE_NUMBER ("skipped sequence numbers") and re-sends that
first batch under the new epoch from sequence 0, although it may already be stored
(it was answered "possibly persisted"); Kafka's idempotence holds within one epoch
only (KIP-360), so no broker can recognise the re-send.
"""

from __future__ import annotations

from helpers.kafkaclient import BlockingClient, fetch_request
from kafkaproto import ApiKey, ErrorCode
from kafkaproto.batch import iter_batches

#: (producer id, producer epoch, sequence) of one record; (-1, -1, -1) for a record
#: without a producer (a non-idempotent batch)
Writer = tuple[int, int, int]

FETCH_VERSION = 11


def read_writers(host: str, port: int, topic: str, partition: int,
                 end: int) -> dict[int, Writer]:
    """Offset -> writer of every record of ``topic``-``partition`` below ``end`` (its high
    watermark when the final read was made), fetched from the broker at host:port (its
    leader)."""
    client = BlockingClient(port, "faultrun-writers", timeout=30, host=host)
    out: dict[int, Writer] = {}
    offset = 0
    try:
        while offset < end:
            response = client.call(ApiKey.FETCH, FETCH_VERSION, fetch_request(topic, partition, offset))
            answer = response.responses[0].partitions[0]
            if answer.error_code != ErrorCode.NONE:
                raise AssertionError(f"fetch of {topic}-{partition} at {offset}: "
                                     f"{ErrorCode(answer.error_code).name}")
            records = answer.records or b""
            before = offset
            for _, header in iter_batches(records):
                if header.last_offset < offset:
                    continue
                for i in range(header.last_offset_delta + 1):
                    sequence = header.base_sequence + i if header.producer_id >= 0 else -1
                    out[header.base_offset + i] = (header.producer_id, header.producer_epoch, sequence)
                offset = header.last_offset + 1
            if offset == before:
                raise AssertionError(f"fetch of {topic}-{partition} at {offset} returned no batch "
                                     f"below the end {end}")
    finally:
        client.close()
    return out
