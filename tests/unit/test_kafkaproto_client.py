"""The sans-I/O client core: correlation, framing in any split, versions, retry decisions,
and the retriable-error table (checked against Kafka's exception hierarchy)."""

from __future__ import annotations

import random

import pytest

from kafkaproto import ApiKey, ErrorCode, decode_request, decode_request_header, encode_response
from kafkaproto.client import (
    ApiVersionTable,
    Backoff,
    ClientConnection,
    KafkaConnectionError,
    KafkaError,
    RetryPolicy,
    UnexpectedResponseError,
)
from kafkaproto.errors import RETRY, Retry, is_retriable, needs_metadata_refresh
from kafkaproto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


def _answer(frame: bytes, body) -> bytes:
    """What a broker sends back for ``frame`` (a whole request, size prefix included)."""
    header, _ = decode_request_header(frame[4:])
    return b"".join(encode_response(header.api_key, header.api_version, header.correlation_id, body))


def _metadata(controller: int) -> MetadataResponse:
    return MetadataResponse(brokers=[], cluster_id="c", controller_id=controller, topics=[])


def test_responses_in_any_split_are_matched_in_order() -> None:
    conn = ClientConnection("t")
    frames = [conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))[1] for _ in range(20)]
    wire = b"".join(_answer(f, _metadata(i)) for i, f in enumerate(frames))
    rng = random.Random(7)
    got = []
    pos = 0
    while pos < len(wire):
        step = rng.randint(1, 40)
        got += conn.receive_data(wire[pos:pos + step])
        pos += step
    assert [r.body.controller_id for r in got] == list(range(20))
    assert [r.correlation_id for r in got] == list(range(1, 21))
    assert conn.in_flight == 0


def test_acks_zero_produce_is_not_waited_for() -> None:
    conn = ClientConnection("t")
    produce = ProduceRequest(acks=0, timeout_ms=1, topic_data=[])
    conn.request(ApiKey.PRODUCE, 9, produce, expect_response=False)
    _, frame = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    assert conn.in_flight == 1
    (response,) = conn.receive_data(_answer(frame, _metadata(3)))
    assert response.correlation_id == 2 and response.body.controller_id == 3


def test_a_response_to_another_request_is_refused() -> None:
    conn = ClientConnection("t")
    _, first = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    _, second = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    with pytest.raises(UnexpectedResponseError):
        conn.receive_data(_answer(second, _metadata(1)))
    fresh = ClientConnection("t")
    with pytest.raises(UnexpectedResponseError):
        fresh.receive_data(_answer(first, _metadata(1)))


def test_undecodable_body_fails_only_its_request() -> None:
    conn = ClientConnection("t")
    _, frame = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    _, frame2 = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    good = _answer(frame, _metadata(1))
    cut = good[:4 + 6]  # correlation id and half a throttle time
    broken = len(cut[4:]).to_bytes(4, "big") + cut[4:]
    bad, ok = conn.receive_data(broken + _answer(frame2, _metadata(2)))
    assert bad.error is not None and bad.body is None
    assert ok.body.controller_id == 2


def test_stamp_resends_a_frame_under_a_new_correlation_id() -> None:
    conn = ClientConnection("t")
    body = ProduceRequest(acks=1, timeout_ms=5, topic_data=[])
    _, frame = conn.request(ApiKey.PRODUCE, 9, body)
    correlation, head = conn.stamp(ApiKey.PRODUCE, 9, frame)
    resent = head + frame[12:]
    header, offset = decode_request_header(resent[4:])
    assert correlation == 2 and header.correlation_id == 2 and conn.in_flight == 2
    assert decode_request(header, resent[4:], offset) == body


def test_close_returns_what_was_never_answered() -> None:
    conn = ClientConnection("t")
    conn.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    assert [r.correlation_id for r in conn.close()] == [1]
    assert conn.in_flight == 0


def _table(**ranges: tuple[int, int]) -> ApiVersionTable:
    return ApiVersionTable({ApiKey[name]: r for name, r in ranges.items()})


def test_version_is_the_smaller_maximum_within_both_minimums() -> None:
    table = _table(METADATA=(0, 12), PRODUCE=(3, 99), FETCH=(20, 30))
    assert table.version(ApiKey.METADATA) == 12
    assert table.version(ApiKey.METADATA, 9) == 9
    from kafkaproto import API_SPECS
    assert table.version(ApiKey.PRODUCE) == API_SPECS[ApiKey.PRODUCE].max_version
    with pytest.raises(KafkaError) as no_overlap:
        table.version(ApiKey.FETCH)
    assert no_overlap.value.code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(KafkaError):
        table.version(ApiKey.METADATA, -1)
    with pytest.raises(KafkaError):
        table.version(ApiKey.LIST_OFFSETS)  # not advertised at all
    assert not table.supports(ApiKey.LIST_OFFSETS) and table.supports(ApiKey.PRODUCE)


def test_api_versions_error_is_raised() -> None:
    response = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[])
    with pytest.raises(KafkaError):
        ApiVersionTable.from_response(response)


def test_every_error_code_has_a_retry_entry() -> None:
    assert set(ErrorCode) <= set(RETRY)
    assert not is_retriable(12345)  # unknown codes: Java's UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize(("code", "retry"), [
    # InvalidMetadataException subclasses
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, Retry.REFRESH_METADATA),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, Retry.REFRESH_METADATA),
    (ErrorCode.NETWORK_EXCEPTION, Retry.REFRESH_METADATA),
    (ErrorCode.KAFKA_STORAGE_ERROR, Retry.REFRESH_METADATA),
    (ErrorCode.FENCED_LEADER_EPOCH, Retry.REFRESH_METADATA),
    (ErrorCode.ELECTION_NOT_NEEDED, Retry.REFRESH_METADATA),
    # RetriableException, metadata is fine
    (ErrorCode.CORRUPT_MESSAGE, Retry.RETRY),
    (ErrorCode.REQUEST_TIMED_OUT, Retry.RETRY),
    (ErrorCode.NOT_COORDINATOR, Retry.RETRY),
    (ErrorCode.NOT_CONTROLLER, Retry.RETRY),
    (ErrorCode.CONCURRENT_TRANSACTIONS, Retry.RETRY),
    (ErrorCode.UNKNOWN_LEADER_EPOCH, Retry.RETRY),
    (ErrorCode.THROTTLING_QUOTA_EXCEEDED, Retry.RETRY),
    (ErrorCode.SHARE_SESSION_LIMIT_REACHED, Retry.RETRY),
    # ApiException only
    (ErrorCode.NONE, Retry.NEVER),
    (ErrorCode.UNKNOWN_SERVER_ERROR, Retry.NEVER),
    (ErrorCode.BROKER_NOT_AVAILABLE, Retry.NEVER),
    (ErrorCode.PRODUCER_FENCED, Retry.NEVER),
    (ErrorCode.UNKNOWN_PRODUCER_ID, Retry.NEVER),
    (ErrorCode.REBALANCE_IN_PROGRESS, Retry.NEVER),
    (ErrorCode.FENCED_STATE_EPOCH, Retry.NEVER),
    (ErrorCode.TRANSACTION_ABORTABLE, Retry.NEVER),
])
def test_retry_table_follows_kafka(code: ErrorCode, retry: Retry) -> None:
    assert RETRY[code] is retry
    assert is_retriable(code) == (retry is not Retry.NEVER)
    assert needs_metadata_refresh(code) == (retry is Retry.REFRESH_METADATA)


def test_retry_policy_decisions() -> None:
    policy = RetryPolicy(Backoff(100, 1000, jitter=0.0), timeout_s=10.0)
    assert [policy.delay_s(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    decision = policy.decide(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 1.0)
    assert decision.retry and decision.delay_s == 0.2 and decision.refresh_metadata
    assert not policy.decide(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 10.0).retry  # timed out
    assert not policy.decide(ErrorCode.INVALID_CONFIG, 1).retry
    assert policy.decide(KafkaConnectionError("gone"), 1).retry
    assert not policy.decide(KafkaError("bad", ErrorCode.TOPIC_AUTHORIZATION_FAILED), 1).retry
    assert not policy.decide(ValueError("not Kafka"), 1).retry
    assert RetryPolicy().decide(ErrorCode.COORDINATOR_NOT_AVAILABLE, 50, 1e9).retry
