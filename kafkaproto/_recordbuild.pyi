from collections.abc import Sequence

from kafkaproto.records import RecordTuple

def encode(records: Sequence[RecordTuple], base_timestamp: int, /) -> tuple[bytes, int]: ...
