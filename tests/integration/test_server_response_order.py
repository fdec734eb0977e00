"""Responses of one pipelined burst leave in request order, whatever path each takes:
answered at once (coalesced into one write), parked (long-poll fetch), or with record
bytes by sendfile between small responses; on both event loops."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Producer
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey
from kafkaproto.batch import iter_batches
from kafkaproto.messages import ApiVersionsRequest, FetchRequest, MetadataRequest
from kafkaproto.records import decode_batch

TOPIC = "burst"
RECORDS = 2000
VALUE = b"r" * 1024


@pytest.fixture(params=["uvloop", "asyncio"])
def server(request, server_factory):
    if request.param == "uvloop":
        pytest.importorskip("uvloop")  # a core dependency; only absent off Linux
    return server_factory(env={"LOGSERVER_EVENT_LOOP": request.param})


def _fetch(offset: int, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=8 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=8 << 20)])],
        forgotten_topics_data=[], rack_id="")  # fmt: skip


def test_one_burst_of_mixed_requests_is_answered_in_order(server):
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=str(i).encode(), value=VALUE)
    assert producer.flush(30) == 0

    client = BlockingClient(server.port)
    try:
        requests = [
            (ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
            (ApiKey.FETCH, 11, _fetch(0, 0)),  # ~2 MiB of records: sendfile
            (ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
            (ApiKey.FETCH, 11, _fetch(RECORDS, 300)),  # at the end: parked for 300 ms
            (ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
            (ApiKey.METADATA, 9, MetadataRequest(topics=None)),
            (ApiKey.API_VERSIONS, 0, ApiVersionsRequest()),
        ]
        frames = [client.core.request(key, version, body)[1] for key, version, body in requests]
        client.sock.sendall(b"".join(frames))
        # The client core refuses any response that is not the oldest request's.
        responses = [client.recv() for _ in requests]
    finally:
        client.close()

    assert all(r.error_code == 0 for r in responses[0:7:2])
    full = responses[1].responses[0].partitions[0]
    assert full.error_code == 0 and full.high_watermark == RECORDS
    offsets = []
    for pos, _header in iter_batches(full.records):
        _, records = decode_batch(full.records, pos)
        assert all(r.value == VALUE for r in records)
        offsets += [r.offset for r in records]
    assert offsets[:1] == [0] and offsets == list(range(len(offsets))) and len(offsets) > 1000
    parked = responses[3].responses[0].partitions[0]
    assert parked.error_code == 0 and not parked.records
    assert TOPIC in {t.name for t in responses[5].topics}

    server.stop()
    calls = re.search(r"sendfile: (\d+) calls", server.output())
    assert calls is not None and int(calls.group(1)) > 0
