"""Framing details and malformed input: headers, KIP-511, tagged fields, FileRegion, DecodeError."""

from __future__ import annotations

import struct

import pytest
from helpers.kafka_samples import sample

from kafkaproto import (
    API_SPECS,
    ApiKey,
    DecodeError,
    EncodeError,
    ErrorCode,
    FileRegion,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kafkaproto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)


def _hdr(key: int, version: int, corr: int, client_id: bytes | None) -> bytes:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", key, version, corr) + cid


def _produce(version: int, records: bytes | None = b"RECORDS") -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )


# --- headers --------------------------------------------------------------------


def test_api_versions_response_header_is_v0_even_when_flexible() -> None:
    body = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=9)]
    )
    for version in range(5):
        (frame,) = encode_response(ApiKey.API_VERSIONS, version, 77, body)
        assert isinstance(frame, bytes)
        assert struct.unpack(">ii", frame[:8]) == (len(frame) - 4, 77)
        assert frame[8:] == body.encode(version)  # no tag buffer after the correlation id
    assert API_SPECS[18].response_header_version(3) == 0


def test_kip511_downgrade_reply_is_a_v0_body() -> None:
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
    )
    (frame,) = encode_response(18, 0, 5, body)
    assert frame == struct.pack(">iihihhh", 16, 5, 35, 1, 18, 0, 4)
    assert decode_response(18, 0, frame[4:]) == (5, body)


def test_flexible_response_header_has_tag_buffer() -> None:
    body = MetadataResponse(controller_id=1)
    (v8,) = encode_response(ApiKey.METADATA, 8, 3, body)
    (v9,) = encode_response(ApiKey.METADATA, 9, 3, body)
    assert v8[8:] == body.encode(8)
    assert v9[8] == 0 and v9[9:] == body.encode(9)
    assert API_SPECS[3].response_header_version(9) == 1
    assert API_SPECS[3].response_header_version(8) == 0


def test_request_header_v2_keeps_int16_client_id() -> None:
    body = ApiVersionsRequest(client_software_name="kp", client_software_version="1.0")
    frame = encode_request(18, 3, 9, "my-client", body)
    assert frame[4:] == _hdr(18, 3, 9, b"my-client") + b"\x00" + body.encode(3)
    header, offset = decode_request_header(frame[4:])
    assert header == RequestHeader(18, 3, 9, "my-client")
    assert offset == 4 + 4 + 2 + 9 + 1
    assert API_SPECS[18].request_header_version(3) == 2
    assert API_SPECS[18].request_header_version(2) == 1


def test_request_header_null_client_id() -> None:
    frame = encode_request(3, 1, 1, None, MetadataRequest(topics=None))
    header, offset = decode_request_header(frame[4:])
    assert header.client_id is None and offset == 10
    assert decode_request(header, frame[4:], offset) == MetadataRequest(topics=None)


def test_request_header_v2_unknown_tags_skipped() -> None:
    body = ApiVersionsRequest(client_software_name="a", client_software_version="b")
    tags = b"\x02" + b"\x05\x03xyz" + b"\x96\x01\x00"  # tag 5 (3 bytes), tag 150 (empty)
    frame = _hdr(18, 3, 1, b"c") + tags + body.encode(3)
    header, offset = decode_request_header(frame)
    assert offset == 11 + len(tags)
    assert decode_request(header, frame, offset) == body


def test_unknown_key_and_version_parse_as_v1() -> None:
    frame = _hdr(999, 4, 31, b"cli") + b"\x00\x01\x02"
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(999, 4, 31, "cli") and offset == 13
    with pytest.raises(UnknownApiKeyError) as exc:
        decode_request(header, frame, offset)
    assert exc.value.api_key == 999

    # ApiVersions v7 from a future client: header v1 offset, body not parsed.
    frame = _hdr(18, 7, 32, b"new") + b"\x00\x00\x00"
    header, offset = decode_request_header(frame)
    assert header.api_version == 7 and offset == 13
    with pytest.raises(UnsupportedVersionError) as uexc:
        decode_request(header, frame, offset)
    assert (uexc.value.api_key, uexc.value.api_version) == (18, 7)


@pytest.mark.parametrize("cut", range(10))
def test_unreadable_v1_header_raises(cut: int) -> None:
    frame = _hdr(3, 1, 1, b"client")
    with pytest.raises(DecodeError):
        decode_request_header(frame[:cut])


def test_header_bad_client_id() -> None:
    with pytest.raises(DecodeError):
        decode_request_header(_hdr(3, 1, 1, None)[:8] + b"\xff\xfe")  # length -2
    with pytest.raises(DecodeError):
        decode_request_header(_hdr(3, 1, 1, b"\xff\xfe"))  # invalid UTF-8
    with pytest.raises(DecodeError):
        decode_request_header(_hdr(3, 1, 1, b"abcdef")[:-2])  # truncated


def test_malformed_header_tag_buffer_surfaces_in_body_decode() -> None:
    frame = _hdr(18, 3, 1, b"c") + b"\x01\x05\x7f"  # tag 5 claims 127 bytes
    header, offset = decode_request_header(frame)
    assert header.correlation_id == 1
    with pytest.raises(DecodeError):
        decode_request(header, frame, offset)


def test_encode_errors() -> None:
    with pytest.raises(UnknownApiKeyError):
        encode_response(999, 0, 1, ProduceResponse())
    with pytest.raises(UnsupportedVersionError):
        encode_response(0, 10, 1, ProduceResponse())
    with pytest.raises(TypeError):
        encode_response(0, 3, 1, ProduceRequest())
    with pytest.raises(EncodeError):
        encode_response(0, 3, 1, ProduceResponse(throttle_time_ms=2**31))
    with pytest.raises(EncodeError):
        encode_request(
            3, 1, 1, "c", MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None)])
        )
    with pytest.raises(EncodeError):
        ProduceRequest(acks=1 << 20).encode(3)  # int16 out of range


# --- malformed bodies -------------------------------------------------------------


def _every_prefix_fails(cls: type, version: int, data: bytes) -> None:
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(data[:cut], version)


@pytest.mark.parametrize(
    "cls",
    [
        ProduceRequest,
        ProduceResponse,
        FetchRequest,
        FetchResponse,
        MetadataRequest,
        MetadataResponse,
    ],
)
def test_truncated_bodies(cls: type) -> None:
    spec = API_SPECS[cls.API_KEY]
    for version in range(spec.min_version, spec.max_version + 1):
        _every_prefix_fails(cls, version, sample(cls, version, array_len=1).encode(version))


def test_truncated_request_frames() -> None:
    frame = encode_request(0, 9, 1, "c", sample(ProduceRequest, 9))[4:]
    header, offset = decode_request_header(frame)
    for cut in range(offset, len(frame)):
        with pytest.raises(DecodeError):
            decode_request(header, frame[:cut], offset)


def test_negative_array_lengths() -> None:
    # Metadata v1: topics is nullable: -1 means null, -2 is malformed.
    assert MetadataRequest.decode(struct.pack(">i", -1), 1).topics is None
    with pytest.raises(DecodeError):
        MetadataRequest.decode(struct.pack(">i", -2), 1)
    # Metadata v0: topics is not nullable.
    with pytest.raises(DecodeError):
        MetadataRequest.decode(struct.pack(">i", -1), 0)
    # Produce v3: topic_data is never nullable.
    with pytest.raises(DecodeError):
        ProduceRequest.decode(b"\xff\xff" + struct.pack(">hii", 1, 100, -1), 3)
    # Flexible: compact length 0 = null, for a non-nullable array that is malformed.
    with pytest.raises(DecodeError):
        ProduceRequest.decode(b"\x00" + struct.pack(">hi", 1, 100) + b"\x00\x00", 9)


def test_negative_string_and_records_lengths() -> None:
    body = struct.pack(">hii", 1, 100, 1) + struct.pack(">h", -2)
    with pytest.raises(DecodeError):
        ProduceRequest.decode(b"\xff\xff" + body, 3)
    part = struct.pack(">i", 0) + struct.pack(">i", -5)  # records length -5
    data = b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\x00\x01t" + struct.pack(">i", 1) + part
    with pytest.raises(DecodeError):
        ProduceRequest.decode(data, 3)
    null_records = (
        b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, -1)
    )
    decoded = ProduceRequest.decode(null_records, 3)
    assert decoded.topic_data[0].partition_data[0].records is None


def test_oversized_lengths() -> None:
    with pytest.raises(DecodeError):
        MetadataRequest.decode(struct.pack(">i", 2**31 - 1), 1)  # array count beyond the frame
    with pytest.raises(DecodeError):
        MetadataRequest.decode(struct.pack(">ih", 1, 500) + b"abc", 1)  # string beyond the frame
    with pytest.raises(DecodeError):
        MetadataRequest.decode(b"\xff\xff\xff\xff\x0f", 9)  # compact count 2**32-2


def test_invalid_utf8() -> None:
    data = struct.pack(">ih", 1, 2) + b"\xc3\x28"
    with pytest.raises(DecodeError):
        MetadataRequest.decode(data, 1)


def test_varint_longer_than_five_bytes() -> None:
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        MetadataRequest.decode(b"\x80\x80\x80\x80\x80\x01", 9)
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        ProduceRequest.decode(b"\xff" * 12, 9)
    # Five bytes is still legal: 0x82 0x80 0x80 0x80 0x00 == 2 (non-minimal but allowed).
    data = b"\x82\x80\x80\x80\x00" + b"\x02a\x00" + b"\x01\x00\x00\x00"
    assert MetadataRequest.decode(data, 9).topics == [
        MetadataRequest.MetadataRequestTopic(name="a")
    ]


def test_non_minimal_varint_and_flexible_topics() -> None:
    # compact array of 1 topic written with a 2-byte varint (0x82 0x00 == 2).
    topic = bytes(16) + b"\x02a" + b"\x00"
    data = b"\x82\x00" + topic + b"\x01\x00\x00\x00"
    decoded = MetadataRequest.decode(data, 10)
    assert decoded.topics == [MetadataRequest.MetadataRequestTopic(name="a")]
    assert decoded.allow_auto_topic_creation is True


# --- tagged fields ----------------------------------------------------------------


def test_unknown_tagged_fields_are_skipped_everywhere() -> None:
    unknown = b"\x02" + b"\x09\x02hi" + b"\x0a\x00"  # two unknown tags
    data = b"\x03ab" + b"\x021" + unknown  # ApiVersionsRequest v3 + unknown tags
    assert ApiVersionsRequest.decode(data, 3) == ApiVersionsRequest(
        client_software_name="ab", client_software_version="1"
    )
    # Produce v9 with unknown tags in every struct level.
    body = (
        b"\x00" + struct.pack(">hi", 1, 5)
        + b"\x02" + b"\x02t"
        + b"\x02" + struct.pack(">i", 3) + b"\x04abc" + unknown
        + unknown + unknown
    )  # fmt: skip
    decoded = ProduceRequest.decode(body, 9)
    assert decoded.topic_data[0].partition_data[0].records == b"abc"


def test_known_tagged_fields_decode_and_default_omitted() -> None:
    req = FetchRequest(cluster_id="cluster-1", max_wait_ms=5)
    data = req.encode(12)
    assert FetchRequest.decode(data, 12).cluster_id == "cluster-1"
    assert FetchRequest(max_wait_ms=5).encode(12)[-1] == 0  # default tagged -> empty buffer
    assert data.endswith(b"\x01\x00\x0a\x0acluster-1")  # 1 tag, tag 0, size 10, string

    part = FetchResponse.PartitionData(partition_index=1)
    resp = FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])]
    )
    plain = resp.encode(12)
    part.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=4)
    tagged = resp.encode(12)
    assert len(tagged) == len(plain) + 1 + 1 + 8 + 1  # tag, size, two int32, nested tag buffer
    back = FetchResponse.decode(tagged, 12)
    assert back.responses[0].partitions[0].current_leader.leader_id == 3
    assert back.responses[0].partitions[0].diverging_epoch == FetchResponse.EpochEndOffset()
    assert b"\x01\x01\x09" + struct.pack(">ii", 3, 4) + b"\x00" in tagged


def test_tagged_fields_sorted_by_tag() -> None:
    resp = ApiVersionsResponse(zk_migration_ready=True, finalized_features_epoch=5)
    data = resp.encode(3)
    # tag 1 (int64) precedes tag 3 (bool) regardless of assignment order
    assert data.endswith(b"\x02" + b"\x01\x08" + struct.pack(">q", 5) + b"\x03\x01\x01")


# --- records and FileRegion ---------------------------------------------------------


class _Region(FileRegion):
    """A region named after the bytes a test substitutes for it (no file involved)."""

    __slots__ = ("name", "length")

    def __init__(self, name: str, length: int) -> None:
        self.name = name
        self.length = length


def test_records_decode_zero_copy() -> None:
    frame = bytearray(encode_request(0, 7, 1, "c", _produce(7, b"x" * 1000))[4:])
    header, offset = decode_request_header(frame)
    req = decode_request(header, frame, offset)
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame and records == b"x" * 1000


@pytest.mark.parametrize("version", [4, 11, 12])
def test_file_region_chunks(version: int) -> None:
    def part(i: int, records: object) -> FetchResponse.PartitionData:
        return FetchResponse.PartitionData(partition_index=i, high_watermark=10, records=records)

    region_a = _Region("a", 300)
    region_b = _Region("b", 5)
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[
                    part(0, region_a),
                    part(1, b"inline"),
                    part(2, None),
                    part(3, region_b),
                ],
            )
        ]
    )
    chunks = encode_response(ApiKey.FETCH, version, 99, resp)
    expected = [bytes, _Region, bytes, _Region]
    if version >= 12:
        expected.append(bytes)  # tag buffers follow the last records field
    assert [type(c) for c in chunks] == expected
    assert chunks[1] == region_a and chunks[3] == region_b
    total = sum(c.length if isinstance(c, FileRegion) else len(c) for c in chunks)
    assert struct.unpack(">i", chunks[0][:4])[0] == total - 4
    # Substitute file contents and decode the frame as a client would.
    content = {"a": b"A" * 300, "b": b"BBBBB"}
    frame = b"".join(content[c.name] if isinstance(c, _Region) else c for c in chunks)
    assert len(frame) == total
    corr, back = decode_response(ApiKey.FETCH, version, frame[4:])
    assert corr == 99
    parts = back.responses[0].partitions
    assert [p.records for p in parts] == [b"A" * 300, b"inline", None, b"BBBBB"]


def test_file_region_at_end_has_no_empty_chunks() -> None:
    region = _Region("c", 10)
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t", partitions=[FetchResponse.PartitionData(records=region)]
            )
        ]
    )
    chunks = encode_response(1, 4, 1, resp)  # v4: records are the last bytes of the frame
    assert chunks[-1] == region and len(chunks) == 2
    with pytest.raises(EncodeError):
        resp.encode(4)  # plain encode() cannot carry a file region


def test_encode_accepts_bytes_like_records() -> None:
    for records in (b"abc", bytearray(b"abc"), memoryview(b"zabc")[1:]):
        data = _produce(3, records).encode(3)
        assert ProduceRequest.decode(data, 3).topic_data[0].partition_data[0].records == b"abc"


@pytest.mark.parametrize("size", [16382, 16383, 100_000, 2_097_152])
@pytest.mark.parametrize("version", [8, 9])
def test_large_records_multi_byte_varints(size: int, version: int) -> None:
    records = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    data = _produce(version, records).encode(version)
    assert ProduceRequest.decode(data, version).topic_data[0].partition_data[0].records == records
    region = _Region("records", size)
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t", partitions=[FetchResponse.PartitionData(records=region)]
            )
        ]
    )
    chunks = encode_response(1, 12, 1, resp)
    frame = b"".join(records if isinstance(c, FileRegion) else c for c in chunks)
    assert decode_response(1, 12, frame[4:])[1].responses[0].partitions[0].records == records


def test_mutated_frames_raise_only_decode_error() -> None:
    """Random corruption never escapes as anything but DecodeError (or decodes)."""
    import contextlib
    import random

    rng = random.Random(1234)
    for spec in API_SPECS.values():
        for cls in (spec.request, spec.response):
            for version in range(spec.min_version, spec.max_version + 1):
                good = sample(cls, version, array_len=1).encode(version)
                if not good:
                    continue  # e.g. ApiVersionsRequest v0 has no body
                for _ in range(40):
                    bad = bytearray(good)
                    for _ in range(rng.randint(1, 4)):
                        bad[rng.randrange(len(bad))] = rng.choice(
                            (0, 0x7F, 0x80, 0xFF, rng.randrange(256))
                        )
                    if rng.random() < 0.3:
                        del bad[rng.randrange(len(bad)) :]
                    with contextlib.suppress(DecodeError):
                        cls.decode(bytes(bad), version)
