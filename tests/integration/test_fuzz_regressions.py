"""Inputs the fuzzers (tests/helpers/fuzz/) once crashed on, replayed through their harness, and the
codec behaviour each fix pinned down. Each entry: harness, input, what was wrong.
"""

from __future__ import annotations

import importlib

import pytest

from mqtt_bridge.codec import MalformedPacket, PacketReader, Unsuback

REGRESSIONS = [
    # The bridge's decode_from let CorruptBatchError (magic 0) out of iter_batches.
    ("record_batches", b"\x03\x01" + bytes(8) + b"\x00\x00\x00C" + b"\xff" * 4 + b"\x00" + bytes(80),
     "unreadable batch header in fetched records ended the downlink"),
    # A 3.1.1 UNSUBACK is the packet identifier alone; the decoder returned the extra
    # bytes as 5.0-style reason codes (found by mqtt_packets' round-trip property).
    ("mqtt_packets", b"\x01\x03" + b"\xb0\x03\x00\x01\x00",
     "3.1.1 UNSUBACK with trailing bytes was accepted"),
]


@pytest.mark.parametrize(("harness", "data", "why"), REGRESSIONS,
                         ids=[f"{h}-{i}" for i, (h, _, _) in enumerate(REGRESSIONS)])
def test_fuzz_regression_input(harness, data, why):
    importlib.import_module(f"helpers.fuzz.{harness}").test_one_input(data)


def test_mqtt311_unsuback_with_trailing_bytes_is_malformed():
    with pytest.raises(MalformedPacket):
        PacketReader(version=4).feed(b"\xb0\x03\x00\x01\x00")
    assert PacketReader(version=4).feed(b"\xb0\x02\x00\x01") == [Unsuback(1)]
    assert PacketReader(version=5).feed(b"\xb0\x04\x00\x01\x00\x11") == [Unsuback(1, [0x11])]


# -- found by the network fuzzer (tests/helpers/fuzz/netfuzz.py) against a running server ---------


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_with_a_null_name_and_unknown_topic_id_is_answered(server, version):
    """Metadata v10/v11 with a null topic name (and an unknown id) made the server build a
    response it could not encode (names are nullable only from v12): a traceback and a
    dropped connection. Kafka refuses null names before v12 with INVALID_REQUEST."""
    from helpers.kafkaclient import BlockingClient

    from kafkaproto import ApiKey, ErrorCode
    from kafkaproto.messages import MetadataRequest

    client = BlockingClient(server.port)
    try:
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=b"\x01" * 16, name=None)], allow_auto_topic_creation=False)
        response = client.call(ApiKey.METADATA, version, request)
        (topic,) = response.topics
        if version < 12:
            assert (topic.error_code, topic.name) == (ErrorCode.INVALID_REQUEST, "")
        else:
            assert (topic.error_code, topic.name) == (ErrorCode.UNKNOWN_TOPIC_ID, None)
        # the connection is still usable
        assert client.call(ApiKey.METADATA, version, MetadataRequest(topics=[])).topics == []
    finally:
        client.close()
    assert "Traceback" not in server.output_tail(100_000)


def test_bridge_fetch_decoding_moves_past_an_unreadable_batch_header():
    """decode_from (the bridge's downlink) let CorruptBatchError out of iter_batches for a
    batch whose magic or length is unreadable, which would end its fetch task; found by
    record_batches' fetched-records mode. Records before it are kept; with none, it steps
    one offset on."""
    from kafkaproto.records import build_batch
    from mqtt_bridge.kafka_fetcher import decode_from

    good = bytearray(build_batch([(b"k", b"v", [], 1), (b"k", b"w", [], 2)], base_offset=5))
    bad = bytearray(build_batch([(b"k", b"x", [], 3)], base_offset=7))
    bad[16] = 1  # magic 1
    reported: list[int] = []
    records, nxt = decode_from(bytes(good + bad), 5, lambda offset, exc: reported.append(offset))
    assert ([r.value for r in records], nxt, reported) == ([b"v", b"w"], 7, [7])
    records, nxt = decode_from(bytes(bad), 7, lambda offset, exc: reported.append(offset))
    assert (records, nxt, reported) == ([], 8, [7, 7])


def test_offset_commit_with_the_largest_retention_time_is_stored(server):
    """OffsetCommit v2-4 with retention_time_ms near 2**63 overflowed the stored int64
    expiry timestamp (struct.error in the coordinator, the connection closed as an
    internal error); found by the network fuzzer. The expiry is capped: never expires."""
    from helpers.clienthelpers import create_topic
    from helpers.kafkaclient import BlockingClient

    from kafkaproto import ApiKey, ErrorCode
    from kafkaproto.messages import OffsetCommitRequest, OffsetFetchRequest

    create_topic(server.bootstrap, "t", 1)
    client = BlockingClient(server.port)
    try:
        commit = OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=2**63 - 1, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=42, committed_metadata="m")])])
        response = client.call(ApiKey.OFFSET_COMMIT, 2, commit)
        assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
        fetched = client.call(ApiKey.OFFSET_FETCH, 1, OffsetFetchRequest(
            group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name="t", partition_indexes=[0])]))
        assert fetched.topics[0].partitions[0].committed_offset == 42
    finally:
        client.close()
    assert "Traceback" not in server.output_tail(100_000)
