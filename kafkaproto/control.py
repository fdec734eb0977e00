"""Transaction markers: the control batches that commit or abort a transaction (KIP-98).

A marker is a batch of one control record with the transactional and control attribute
bits set, the producer's id and epoch, base sequence -1; its key is (int16 version 0,
int16 type: 0 abort, 1 commit) and its value (int16 version 0, int32 coordinator epoch),
as Kafka's EndTransactionMarker writes them.
"""

from __future__ import annotations

import struct

from kafkaproto.batch import CONTROL_MASK, compute_crc
from kafkaproto.records import build_batch

__all__ = ["ABORT", "COMMIT", "build_marker"]

ABORT = 0
COMMIT = 1
_ATTRIBUTES_OFFSET = 21
_CRC_OFFSET = 17
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def build_marker(producer_id: int, producer_epoch: int, *, commit: bool,
                 coordinator_epoch: int, timestamp_ms: int) -> bytearray:
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    batch = bytearray(build_batch([(key, value, (), timestamp_ms)], producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=-1,
                                  is_transactional=True))
    attributes = struct.unpack_from(">h", batch, _ATTRIBUTES_OFFSET)[0] | CONTROL_MASK
    struct.pack_into(">h", batch, _ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">I", batch, _CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return batch
