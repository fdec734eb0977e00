"""Topic creation on a real server: concurrent creations of one name have one winner,
a wide topic is never seen half-made, and settings the server does not apply are
refused with INVALID_CONFIG (and still described with the value that holds); a topic's
min.insync.replicas above 1 is accepted and makes acks=all NOT_ENOUGH_REPLICAS."""

from __future__ import annotations

import select

import pytest
from confluent_kafka import KafkaError, Producer
from helpers.rawwire import Conn

from kafkaproto import ApiKey, ErrorCode, decode_response, encode_request
from kafkaproto.messages import CreateTopicsRequest, DescribeConfigsRequest, MetadataRequest

# Values refused with INVALID_CONFIG: out of Kafka's range, no such codec, or a meaning
# this server cannot honour (tiered storage).
REFUSED = {"flush.messages": "0", "flush.ms": "-1", "compression.type": "brotli",
           "remote.storage.enable": "true"}


pytestmark = [pytest.mark.timeout(120)]


def create_frame(name: str, partitions: int, configs: dict[str, str] | None = None,
                 correlation: int = 1) -> bytes:
    return encode_request(ApiKey.CREATE_TOPICS, 5, correlation, "t", CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])],
        timeout_ms=60_000, validate_only=False))


def create_result(frame: bytes | None) -> CreateTopicsRequest:
    assert frame is not None, "the server closed the connection"
    return decode_response(ApiKey.CREATE_TOPICS, 5, frame)[1].topics[0]  # type: ignore[attr-defined]


def metadata(conn: Conn, name: str) -> tuple[int, int]:
    conn.send(encode_request(ApiKey.METADATA, 9, 2, "t", MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)))
    frame = conn.recv_frame()
    assert frame is not None
    topic = decode_response(ApiKey.METADATA, 9, frame)[1].topics[0]  # type: ignore[attr-defined]
    return topic.error_code, len(topic.partitions)


def test_concurrent_creations_of_one_name(server):
    with Conn(server.port, timeout=60) as first, Conn(server.port, timeout=60) as second:
        assert first.send(create_frame("race", 300)) and second.send(create_frame("race", 300))
        errors = sorted([create_result(first.recv_frame()).error_code,
                         create_result(second.recv_frame()).error_code])
        assert errors == [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS]
        assert metadata(first, "race") == (ErrorCode.NONE, 300)


def test_a_wide_topic_is_never_seen_half_created(server):
    wide = 1000
    with Conn(server.port, timeout=60) as creator, Conn(server.port, timeout=60) as watcher:
        assert creator.send(create_frame("wide", wide))
        seen = set()
        while not select.select([creator.sock], [], [], 0)[0]:
            answer = metadata(watcher, "wide")
            assert answer in ((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0), (ErrorCode.NONE, wide))
            seen.add(answer)
        assert create_result(creator.recv_frame()).error_code == ErrorCode.NONE
        assert metadata(watcher, "wide") == (ErrorCode.NONE, wide)
        assert (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0) in seen  # it was watched while in flight


def test_settings_not_applied_are_refused_and_described(server):
    with Conn(server.port) as conn:
        for key, value in REFUSED.items():
            conn.send(create_frame("refused", 1, {key: value}))
            result = create_result(conn.recv_frame())
            assert result.error_code == ErrorCode.INVALID_CONFIG
            assert key in result.error_message
        assert metadata(conn, "refused") == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)
        conn.send(create_frame("kept", 1, {"retention.ms": "60000"}))
        assert create_result(conn.recv_frame()).error_code == ErrorCode.NONE
        conn.send(encode_request(ApiKey.DESCRIBE_CONFIGS, 4, 3, "t", DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name="kept", configuration_keys=None)],
            include_synonyms=False, include_documentation=False)))
        frame = conn.recv_frame()
        assert frame is not None
        configs = decode_response(ApiKey.DESCRIBE_CONFIGS, 4, frame)[1].results[0].configs  # type: ignore[attr-defined]
        described = {c.name: (c.value, c.config_source) for c in configs}
        assert described["retention.ms"] == ("60000", 1)  # DYNAMIC_TOPIC_CONFIG
        assert described["min.insync.replicas"] == ("1", 5)  # DEFAULT_CONFIG: what holds
        assert described["compression.type"] == ("producer", 5)


def test_topic_min_insync_replicas_above_one_refuses_acks_all(server):
    """As on a one-broker Kafka: the override is accepted and described, and acks=all
    then gets NOT_ENOUGH_REPLICAS (one replica); acks=1 still writes."""
    with Conn(server.port) as conn:
        conn.send(create_frame("strict", 1, {"min.insync.replicas": "2"}))
        assert create_result(conn.recv_frame()).error_code == ErrorCode.NONE
        conn.send(encode_request(ApiKey.DESCRIBE_CONFIGS, 4, 3, "t", DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name="strict", configuration_keys=["min.insync.replicas"])],
            include_synonyms=False, include_documentation=False)))
        frame = conn.recv_frame()
        assert frame is not None
        configs = decode_response(ApiKey.DESCRIBE_CONFIGS, 4, frame)[1].results[0].configs  # type: ignore[attr-defined]
        assert [(c.value, c.config_source) for c in configs] == [("2", 1)]  # DYNAMIC_TOPIC_CONFIG
    outcome: dict[str, int] = {}
    for acks in ("all", "1"):
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": acks,
                             "message.timeout.ms": 20000, "retries": 0})
        producer.produce("strict", b"v", on_delivery=lambda err, _msg, acks=acks: outcome.__setitem__(
            acks, 0 if err is None else err.code()))
        assert producer.flush(30) == 0
    assert outcome == {"all": KafkaError.NOT_ENOUGH_REPLICAS, "1": 0}
