"""kafkaproto.validate: full record-batch validation and the capped decompressor.

Every check runs against both record walks (the compiled one and its pure-Python twin),
and a differential test holds them to the same answer on mutated payloads.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from helpers.batchforge import forge, raw_record, recrc, valid
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaproto import validate
from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    RecordErrorsError,
    parse_header,
    verify_crc,
)
from kafkaproto.compression import (
    DecompressionBombError,
    DecompressionError,
    compress,
    decompress_capped,
)
from kafkaproto.records import decode_batch

CAP = 1 << 20
CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
WALKS = {"c": validate._walk, "python": validate._walk_python}


def test_compiled_walk_is_built() -> None:
    # The produce path's cost budget relies on it; build with `pip install -e .` or
    # `python setup.py build_ext --inplace`.
    assert validate.WALK_IMPLEMENTATION == "c"
    assert validate._walk is not validate._walk_python


@pytest.fixture(params=sorted(WALKS))
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with one record walk installed as the validator's."""
    monkeypatch.setattr(validate, "_walk", WALKS[request.param])
    yield request.param


def check(batch: bytearray | bytes, **kwargs: object) -> validate.ValidatedBatch:
    return validate.validate_batch(batch, max_uncompressed_bytes=CAP, **kwargs)  # type: ignore[arg-type]


# -- valid batches round-trip ------------------------------------------------------------

header_keys = st.text(max_size=8)
optional_bytes = st.none() | st.binary(max_size=40)
records_strategy = st.lists(
    st.tuples(
        optional_bytes,
        optional_bytes,
        st.lists(st.tuples(header_keys, optional_bytes), max_size=3),
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1,
    max_size=30,
)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@settings(max_examples=40, deadline=None)
@given(records=records_strategy)
def test_valid_batches_pass(codec: Compression, records: list) -> None:
    batch = valid(records, codec)
    for walk_fn in WALKS.values():
        original = validate._walk
        validate._walk = walk_fn
        try:
            result = check(bytes(batch))
        finally:
            validate._walk = original
        assert result.header == parse_header(batch)
        assert result.header.record_count == len(records)
        assert result.max_timestamp == max(r[3] for r in records)
        _, decoded = decode_batch(batch)
        assert result.uncompressed_size >= len(decoded) * 7


@settings(max_examples=300, deadline=None)
@given(
    records=records_strategy,
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=4),
    cut=st.integers(min_value=0),
    reject_null_keys=st.booleans(),
)
def test_compiled_and_python_walks_agree(
    records: list, edits: list[tuple[int, int]], cut: int, reject_null_keys: bool
) -> None:
    payload = bytearray(valid(records)[BATCH_HEADER_SIZE:])
    for where, byte in edits:
        payload[where % len(payload)] = byte
    if cut % 3 == 0:
        del payload[cut % len(payload) :]
    count = len(records)
    assert validate._walk(bytes(payload), count, reject_null_keys) == validate._walk_python(
        bytes(payload), count, reject_null_keys
    )


# -- CRC-valid batches whose records are wrong -----------------------------------------

def records_payload(n: int, **overrides: object) -> bytes:
    """n well-formed records; ``overrides`` apply to the record at index 1."""
    return b"".join(
        raw_record(**{"offset_delta": i, **(overrides if i == 1 else {})})  # type: ignore[arg-type]
        for i in range(n)
    )


CORRUPTIONS: list[tuple[str, bytes, int, type[Exception], str]] = [
    ("garbage records", b"\xff" * 40, 3, CorruptBatchError, "record 0 .*length varint"),
    ("payload too short for count", records_payload(2), 3, InvalidRecordError,
     "declares 3 records but its payload ends after 2"),
    ("records beyond count", records_payload(3), 2, CorruptBatchError,
     r"\d+ bytes remain after the batch's 2 records"),
    ("offset delta", records_payload(3, offset_delta=5), 3, InvalidRecordError,
     "record 1 .*offset delta 5, expected 1"),
    ("truncated varint", records_payload(1) + b"\x80", 2, CorruptBatchError,
     "record 1 .*length varint is truncated"),
    ("over-long varint", records_payload(1) + b"\xff" * 6, 2, CorruptBatchError,
     "record 1 .*length varint"),
    ("varint outside int32", records_payload(1) + b"\xff\xff\xff\xff\x1f" + b"\x00" * 8, 2,
     CorruptBatchError, "record 1 .*length varint"),
    ("varlong outside int64", b"\x1e\x00" + b"\xff" * 9 + b"\x02" + b"\x00" * 4, 1,
     CorruptBatchError, "record 0 .*timestampDelta varint"),
    ("truncated timestamp varlong", raw_record(offset_delta=0)[:1] + b"\x00\x00\x00\x00\x80\x80"[:6],
     1, CorruptBatchError, "record 0 .*(timestampDelta|length)"),
    ("negative key length", records_payload(2, key=b"", key_length=-2), 2, CorruptBatchError,
     "record 1 .*key length -2"),
    ("key past the record", records_payload(2, key=b"abc", key_length=100), 2, CorruptBatchError,
     "record 1 .*key length 100"),
    ("negative value length", records_payload(2, value=b"", value_length=-7), 2,
     CorruptBatchError, "record 1 .*value length -7"),
    ("negative header count", records_payload(2, header_count=-3), 2, CorruptBatchError,
     "record 1 .*header count -3"),
    ("null header key", records_payload(2, headers=[(None, b"x")]), 2, InvalidRecordError,
     "record 1 .*null key"),
    ("header key not utf-8", records_payload(2, headers=[(b"\xff\xfe", b"x")]), 2,
     InvalidRecordError, "record 1 .*not UTF-8"),
    ("negative header value length", raw_record(offset_delta=0, headers=[(b"h", b"")])[:-1]
     + b"\x05", 1, CorruptBatchError, "record 0 .*header value length -3"),
    ("record longer than its fields", records_payload(2, length_adjust=1), 2, CorruptBatchError,
     "record 1 "),
    ("record length below minimum", b"\x04" + b"\x00" * 2, 1, CorruptBatchError,
     "record 0 .*record length 2"),
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    ("payload", "count", "error", "message"),
    [c[1:] for c in CORRUPTIONS],
    ids=[c[0] for c in CORRUPTIONS],
)
def test_crc_valid_bad_records_are_refused(
    walk: str, codec: Compression, payload: bytes, count: int, error: type[Exception],
    message: str,
) -> None:
    batch = forge(payload, record_count=count, compression=codec)
    assert verify_crc(batch)
    with pytest.raises(error, match=message) as caught:
        check(batch)
    # Corrupt and invalid stay distinct: CORRUPT_MESSAGE vs INVALID_RECORD.
    assert type(caught.value) is error or issubclass(type(caught.value), error)
    if error is InvalidRecordError:
        assert not isinstance(caught.value, CorruptBatchError)


def test_trailing_bytes_inside_compressed_payload(walk: str) -> None:
    batch = forge(records_payload(2) + b"\x00", record_count=2, compression=Compression.ZSTD)
    with pytest.raises(CorruptBatchError, match="1 bytes remain after the batch's 2 records"):
        check(batch)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_garbage_compressed_payload(walk: str, codec: Compression) -> None:
    good = compress(codec, records_payload(3))
    for garbage in (b"\x00garbage" * 8, good[: len(good) // 2]):
        template = forge(b"", record_count=3)
        batch = bytearray(template[:BATCH_HEADER_SIZE]) + garbage
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        struct.pack_into(">h", batch, 21, int(codec))
        recrc(batch)
        with pytest.raises(DecompressionError, match=codec.name):
            check(batch)


def test_null_key_only_refused_for_compacted_topics(walk: str) -> None:
    batch = forge(records_payload(3, key=None), record_count=3)
    assert check(batch).header.record_count == 3
    with pytest.raises(InvalidRecordError, match="record 1 .*compacted topic .* without a key"):
        check(batch, reject_null_keys=True)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD], ids=lambda c: c.name)
def test_records_without_a_key_are_each_named(walk: str, codec: Compression) -> None:
    """KIP-467: the batch is refused, with the index of every record at fault, so the
    producer fails only those (Kafka's LogValidator collects them all)."""
    keys = [None, b"k", None, b"k", None, None, b"k"]
    payload = b"".join(raw_record(offset_delta=i, key=k) for i, k in enumerate(keys))
    batch = forge(compress(codec, payload) if codec else payload, record_count=len(keys),
                  attributes=int(codec))
    with pytest.raises(RecordErrorsError) as caught:
        check(batch, reject_null_keys=True)
    assert caught.value.record_errors == tuple(
        (i, validate.NULL_KEY_MESSAGE) for i, k in enumerate(keys) if k is None)
    assert "4 of the batch's 7 records" in str(caught.value)
    assert "record 2 (payload byte" in str(caught.value)


def test_malformed_record_after_a_missing_key_refuses_the_batch_as_corrupt(walk: str) -> None:
    payload = raw_record(offset_delta=0, key=None) + raw_record(offset_delta=1, value_length=-7)
    with pytest.raises(CorruptBatchError, match="record 1 .*value length -7"):
        check(forge(payload, record_count=2), reject_null_keys=True)


def test_header_checks_still_run_first(walk: str) -> None:
    batch = valid([(b"k", b"v", [], 5)])
    batch[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC mismatch"):
        check(batch)


def test_wrong_max_timestamp_is_recomputed_as_kafka_does(walk: str) -> None:
    payload = b"".join(
        raw_record(offset_delta=i, timestamp_delta=d) for i, d in enumerate((0, 40, 7))
    )
    batch = forge(payload, record_count=3, base_timestamp=1_000, max_timestamp=999_999)
    with pytest.raises(InvalidRecordError, match="maxTimestamp 999999 disagrees .* 1040"):
        check(bytes(batch))
    with pytest.raises(InvalidRecordError, match="disagrees"):
        check(batch, fix_max_timestamp=False)
    result = check(batch)
    assert result.max_timestamp == result.header.max_timestamp == 1_040
    assert parse_header(batch).max_timestamp == 1_040
    assert verify_crc(batch)


def test_records_over_the_cap_are_a_bomb(walk: str) -> None:
    records = [(b"k", b"x" * 1000, [], 1) for _ in range(50)]
    for codec in COMPRESSED:
        batch = valid(records, codec)
        with pytest.raises(DecompressionBombError):
            validate.validate_batch(batch, max_uncompressed_bytes=10_000)
        assert validate.validate_batch(batch, max_uncompressed_bytes=60_000)


# -- the capped decompressor on its own ---------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
@pytest.mark.parametrize("size", [0, 1, 40_000, 300_000])
def test_capped_round_trip_and_exact_cap(codec: Compression, size: int) -> None:
    data = (bytes(range(256)) * (size // 256 + 1))[:size]
    packed = compress(codec, data)
    assert decompress_capped(codec, packed, size) == data
    assert decompress_capped(codec, memoryview(packed), size + 10) == data
    if size:
        with pytest.raises(DecompressionBombError, match=f"cap of {size - 1} bytes"):
            decompress_capped(codec, packed, size - 1)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_capped_refuses_truncated_and_trailing_garbage(codec: Compression) -> None:
    packed = compress(codec, b"hello kafka " * 5000)
    for bad in (packed[:-1], packed[: len(packed) // 2], packed + b"\x01\x02", b"nonsense!"):
        with pytest.raises(DecompressionError) as caught:
            decompress_capped(codec, bad, CAP)
        assert not isinstance(caught.value, DecompressionBombError)


# -- decompression bombs, with the peak memory of a real process measured -----------------

BOMB_SIZE = 1 << 30  # 1 GiB of zeros once inflated
BOMB_CAP = 1 << 20  # message.max.bytes' default is about this
BOMB_PROBE = """
import resource, sys
from kafkaproto.compression import DecompressionBombError
from kafkaproto.validate import validate_batch
batch = bytearray(open(sys.argv[1], "rb").read())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    validate_batch(batch, max_uncompressed_bytes=int(sys.argv[2]))
except DecompressionBombError as exc:
    outcome = "bomb: " + str(exc)
else:
    outcome = "accepted"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(after - before, outcome)
"""


def _bomb_batch(compressed: bytes, codec: Compression) -> bytearray:
    batch = forge(b"", record_count=1)[:BATCH_HEADER_SIZE] + compressed
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, int(codec))
    return recrc(batch)


@pytest.mark.parametrize(
    "kind", ["GZIP", "SNAPPY", "LZ4", "ZSTD", "SNAPPY-raw"], ids=str
)
def test_decompression_bomb_is_refused_with_bounded_memory(
    kind: str, tmp_path: pytest.TempPathFactory
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from helpers.bombs import raw_snappy_claiming, zeros_bomb

    codec = Compression[kind.split("-")[0]]
    compressed = raw_snappy_claiming(BOMB_SIZE) if kind == "SNAPPY-raw" else zeros_bomb(
        codec, BOMB_SIZE
    )
    assert len(compressed) < BOMB_SIZE // 20
    path = Path(str(tmp_path)) / "bomb.batch"
    path.write_bytes(_bomb_batch(compressed, codec))
    repo = Path(__file__).resolve().parents[2]
    probe = subprocess.run(
        [sys.executable, "-c", BOMB_PROBE, str(path), str(BOMB_CAP)],
        capture_output=True, text=True, timeout=120, cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
    )
    assert probe.returncode == 0, probe.stderr
    growth_kib, outcome = probe.stdout.strip().split(" ", 1)
    assert outcome.startswith(f"bomb: {codec.name} records inflate past the cap of {BOMB_CAP}")
    assert int(growth_kib) * 1024 < 3 * BOMB_CAP + (50 << 20), (kind, growth_kib)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_decode_batch_and_iter_records_honour_the_cap(codec: Compression) -> None:
    from kafkaproto.records import iter_records

    records = [(b"k", b"x" * 1000, [], 1) for _ in range(50)]
    batch = valid(records, codec)
    _, decoded = decode_batch(batch, max_uncompressed_bytes=60_000)
    assert [r.value for r in decoded] == [b"x" * 1000] * 50
    with pytest.raises(DecompressionBombError):
        decode_batch(batch, max_uncompressed_bytes=10_000)
    with pytest.raises(DecompressionBombError):
        list(iter_records(bytes(batch) * 2, max_uncompressed_bytes=10_000))
    assert len(list(iter_records(bytes(batch) * 2, max_uncompressed_bytes=60_000))) == 100
