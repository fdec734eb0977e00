"""Bad input over a raw socket: garbage frames, an unknown API key, unsupported versions,
a frame over socket.request.max.bytes, a batch with a wrong CRC.

Each gets the documented answer (an error response, or the connection closed, as Apache
Kafka does), and in every case another client connected at the same time keeps being
served and the log is unchanged.

What Apache Kafka does, and what these tests accept:
- garbage / unparseable header, unknown API key, unsupported version of an API other
  than ApiVersions: Kafka closes the connection (InvalidRequestException while parsing
  the header). Required: the connection closed (a well-formed response frame carrying
  the request's correlation id is a failure).
- ApiVersions above the supported range (KIP-511): a v0-encoded response with error 35
  UNSUPPORTED_VERSION and the ApiVersions range. Required exactly.
- a frame larger than socket.request.max.bytes: connection closed without reading it.
- a produce batch with a bad CRC, or truncated: CORRUPT_MESSAGE (2) in that partition's
  response; a batch Kafka refuses for its content (control batch, wrong counts, magic 1,
  unknown codec, two batches, no records, producer id without sequence): INVALID_RECORD
  (87).
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from helpers import rawwire as rw
from helpers.clienthelpers import create_topic, kp_read

pytestmark = pytest.mark.timeout(120)


def _closed_or_response(conn: rw.Conn, correlation_id: int, timeout: float = 10.0) -> str:
    """'closed' if the server closed the connection, 'response' if it answered with a
    well-formed frame carrying ``correlation_id`` (then it must not hang afterwards)."""
    try:
        frame = conn.recv_frame(timeout=timeout)
    except TimeoutError:
        pytest.fail(f"no answer and no close within {timeout}s: the connection hangs")
    if frame is None:
        return "closed"
    assert len(frame) >= 4
    (corr,) = struct.unpack_from(">i", frame)
    assert corr == correlation_id, f"response with correlation id {corr}, sent {correlation_id}"
    return "response"


# ---------------------------------------------------------------- garbage
@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">i", 7) + b"\xde\xad\xbe\xef\x00\x01\x02",  # too short for a header
        struct.pack(">i", 64) + b"\xff" * 64,  # api key -1, version -1, ...
        struct.pack(">i", 200) + os.urandom(200),
        struct.pack(">i", 0),  # empty frame
        struct.pack(">i", -5) + b"abc",  # negative size
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # a web client on the port
    ],
    ids=["short", "all-ff", "random", "empty", "negative-size", "http"],
)
def test_garbage_frame(module_server, seeded, payload):
    _, check = seeded
    with rw.Conn(module_server.port) as c:
        c.send(payload)
        (size,) = struct.unpack_from(">i", payload)
        if 8 <= size <= len(payload) - 4:
            corr = struct.unpack_from(">i", payload, 8)[0]
            outcome = _closed_or_response(c, corr)
            # Kafka closes on an unparseable header or an unknown API; only an
            # ApiVersions request (key 18) gets an answer whatever its version (KIP-511).
            (api_key,) = struct.unpack_from(">h", payload, 4)
            assert outcome == ("response" if api_key == rw.API_API_VERSIONS else "closed"), \
                f"garbage {payload[:12]!r}...: {outcome}"
        else:
            # nothing sensible to answer: the connection must be closed (or, for the
            # HTTP line whose "size" is huge, closed as over the limit)
            assert c.closed_by_server(timeout=10), "garbage left the connection open"
    check()


# ---------------------------------------------------------------- unknown API key
@pytest.mark.parametrize("api_key", [9999, 30000, 71])
def test_unknown_api_key(module_server, seeded, api_key):
    """An API key the server does not implement (9999, 30000: none; 71
    GetTelemetrySubscriptions: real but not served). Kafka closes the connection."""
    _, check = seeded
    with rw.Conn(module_server.port) as c:
        c.send(rw.request(api_key, 0, 4242, b"\x00" * 16))
        assert _closed_or_response(c, 4242) == "closed", f"unknown api key {api_key} answered"
    check()


# ---------------------------------------------------------------- versions
@pytest.mark.parametrize("version", [5, 100, 32767])
def test_api_versions_unsupported_version_kip511(module_server, seeded, version):
    """KIP-511: v0-encoded body, error 35, and the ApiVersions range; the connection
    stays open so the client can retry with a version the server supports."""
    _, check = seeded
    with rw.Conn(module_server.port) as c:
        # a flexible-looking request body the server must not try to parse
        body = b"\x0csome-client\x061.2.3\x00" + os.urandom(8)
        res = c.call(rw.request(rw.API_API_VERSIONS, version, 777, body, flexible=True))
        assert res is not None, "server closed the connection instead of the KIP-511 reply"
        corr, payload = res
        assert corr == 777
        err, keys = rw.parse_api_versions_v0(payload)
        assert err == rw.UNSUPPORTED_VERSION
        assert rw.API_API_VERSIONS in keys, keys
        lo, hi = keys[rw.API_API_VERSIONS]
        assert lo == 0 and 3 <= hi < version, (lo, hi)
        # the client retries with v0 on the same connection
        keys = rw.api_versions_ok(conn=c, correlation_id=778)
        assert keys[rw.API_PRODUCE][1] >= 7 and keys[rw.API_FETCH][1] >= 11, keys
    check()


def test_api_versions_advertised_ranges(module_server):
    """The advertised ranges (kafka-compat.md section 2) for the APIs served so far."""
    keys = rw.api_versions_ok(module_server.port)
    want = {18: (0, 4), 3: (0, 12), 0: (3, 9), 1: (4, 16), 2: (1, 10), 22: (0, 4),
            19: (2, 7), 20: (1, 6), 32: (1, 4),
            37: (0, 3), 21: (0, 2), 33: (0, 2), 44: (0, 1), 35: (0, 4), 60: (0, 1)}
    for key, rng in want.items():
        assert keys.get(key) == rng, f"api {key}: advertised {keys.get(key)}, want {rng}"
    # the group APIs, with the ranges every client profile needs
    groups = {8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5),
              14: (0, 5), 15: (0, 5), 16: (0, 5), 68: (0, 1), 69: (0, 1)}
    for key, rng in groups.items():
        assert keys.get(key) == rng, f"api {key}: advertised {keys.get(key)}, want {rng}"
    # transactions (KIP-98) over the versions implemented
    for key, rng in {24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 61: (0, 0),
                     65: (0, 0), 66: (0, 1)}.items():
        assert keys.get(key) == rng, f"api {key}: advertised {keys.get(key)}, want {rng}"
    # never telemetry, share groups
    for key in (71, 72, 76, 77, 78, 79):
        assert key not in keys, f"api {key} advertised but not implemented"


@pytest.mark.parametrize("version", [0, 2, 10, 1000])
def test_produce_unsupported_version(module_server, seeded, version):
    topic, check = seeded
    batch = rw.record_batch([(b"k", b"must-not-land")])
    with rw.Conn(module_server.port) as c:
        c.send(rw.request(rw.API_PRODUCE, version, 5150,
                          rw.produce_v3(topic, 0, batch)))
        # as Kafka: a version outside the advertised range closes the connection
        assert _closed_or_response(c, 5150) == "closed", f"produce v{version} answered"
    check()


# ---------------------------------------------------------------- size limit
def test_frame_over_socket_request_max_bytes_default(module_server, seeded):
    """A size prefix above 104857600 (the default limit): closed without reading it."""
    _, check = seeded
    with rw.Conn(module_server.port) as c:
        c.send(struct.pack(">i", 104857600 + 1) + rw.request(rw.API_API_VERSIONS, 0, 1)[4:])
        # the frame's body never comes: only a server that judges the size prefix closes
        assert c.closed_by_server(timeout=30), "oversized frame did not close the connection"
    check()


def test_frame_over_configured_limit(server_factory, topic_name):
    """With socket.request.max.bytes=20000, a real 30000-byte produce request closes the
    connection, a 10000-byte one is served, and other clients keep being served."""
    srv = server_factory(settings={"socket.request.max.bytes": 20000})
    create_topic(srv.bootstrap, topic_name, partitions=1)
    with rw.Conn(srv.port) as healthy:
        rw.api_versions_ok(conn=healthy)
        with rw.Conn(srv.port) as c:
            big = rw.request(rw.API_PRODUCE, 3, 9,
                             rw.produce_v3(topic_name, 0, rw.record_batch([(None, b"x" * 30000)])))
            c.send(big)
            assert c.closed_by_server(timeout=10)
        with rw.Conn(srv.port) as c:
            ok = rw.request(rw.API_PRODUCE, 3, 10,
                            rw.produce_v3(topic_name, 0, rw.record_batch([(None, b"y" * 10000)])))
            res = c.call(ok)
            assert res is not None
            assert rw.parse_produce_v3_response(res[1]) == {(topic_name, 0): (0, 0)}
        rw.api_versions_ok(conn=healthy)
    assert [r.value for r in kp_read(srv.bootstrap, topic_name)] == [b"y" * 10000]


# ---------------------------------------------------------------- record batches
def test_produce_raw_valid_batch(module_server, seeded):
    """Sanity check of the hand-written encoder: a valid batch is appended."""
    topic, _ = seeded
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 31,
                                rw.produce_v3(topic, 0, rw.record_batch([(b"rk", b"raw")]))))
        assert res is not None and res[0] == 31
        assert rw.parse_produce_v3_response(res[1]) == {(topic, 0): (0, 5)}
    assert kp_read(module_server.bootstrap, topic)[-1].value == b"raw"


def test_produce_wrong_crc(module_server, seeded):
    topic, check = seeded
    bad = rw.record_batch([(b"k1", b"corrupt-1"), (b"k2", b"corrupt-2")], corrupt_crc=True)
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 99, rw.produce_v3(topic, 0, bad)))
        assert res is not None, "server closed the connection on a bad CRC"
        corr, body = res
        assert corr == 99
        (err, _base), = rw.parse_produce_v3_response(body).values()
        assert err == rw.CORRUPT_MESSAGE, f"error {err}, want CORRUPT_MESSAGE (2)"
        # the same connection is still usable
        rw.api_versions_ok(conn=c, correlation_id=100)
    check()


def test_produce_flipped_record_byte(module_server, seeded):
    """A correct CRC field but a record byte changed in flight: CORRUPT_MESSAGE."""
    topic, check = seeded
    batch = bytearray(rw.record_batch([(b"k", b"flip-me-please")]))
    batch[-5] ^= 0x20
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 55, rw.produce_v3(topic, 0, bytes(batch))))
        assert res is not None
        (err, _), = rw.parse_produce_v3_response(res[1]).values()
        assert err == rw.CORRUPT_MESSAGE
    check()


def test_produce_truncated_batch(module_server, seeded):
    """A batch whose length field promises more bytes than the records field holds."""
    topic, check = seeded
    batch = rw.record_batch([(b"k", b"truncated")])[:-4]
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 56, rw.produce_v3(topic, 0, batch)))
        assert res is not None, "the server closed the connection on a truncated batch"
        assert res[0] == 56
        (err, _), = rw.parse_produce_v3_response(res[1]).values()
        assert err == rw.CORRUPT_MESSAGE, f"error {err}, want CORRUPT_MESSAGE (2)"
    check()


def test_many_bad_connections_do_not_starve_good_ones(module_server, seeded):
    """50 connections of garbage in a row, then the healthy one is still served fast."""
    _, check = seeded
    for i in range(50):
        with socket.create_connection(("127.0.0.1", module_server.port), timeout=5) as s:
            s.sendall(struct.pack(">i", 12) + os.urandom(12) if i % 2 else b"\xff" * 8)
    t0 = time.monotonic()
    check()
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: rw.record_batch([(None, b"c")], attributes=0x20), id="control-batch"),
        pytest.param(lambda: rw.record_batch([(None, b"a"), (None, b"b")], last_offset_delta=5),
                     id="count-vs-last-offset-delta"),
        pytest.param(lambda: rw.record_batch([(None, b"a"), (None, b"b")], record_count=7),
                     id="record-count-too-big"),
        pytest.param(lambda: rw.record_batch([(None, b"m")], magic=1), id="magic-1"),
        pytest.param(lambda: rw.record_batch([(None, b"one")]) + rw.record_batch([(None, b"two")]),
                     id="two-batches"),
        pytest.param(lambda: rw.record_batch([(None, b"x")], attributes=0x07), id="codec-7"),
        pytest.param(lambda: rw.record_batch([(None, b"x")], producer_id=12345,
                                             producer_epoch=0, base_sequence=-1),
                     id="pid-without-sequence"),
        pytest.param(lambda: rw.record_batch([]), id="zero-records"),
    ],
)
def test_produce_invalid_batch_rejected(module_server, seeded, make):
    """Batches Kafka refuses (INVALID_RECORD, CORRUPT_MESSAGE, UNSUPPORTED_...): an error
    for the partition, nothing appended, the connection and the server still fine."""
    topic, check = seeded
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 61, rw.produce_v3(topic, 0, make())))
        assert res is not None, "the server closed the connection on an invalid batch"
        assert res[0] == 61
        ((err, _),) = rw.parse_produce_v3_response(res[1]).values()
        assert err == rw.INVALID_RECORD, f"error {err}, want INVALID_RECORD (87)"
    check()


def test_produce_unknown_partition(module_server, seeded):
    topic, check = seeded
    with rw.Conn(module_server.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 62,
                                rw.produce_v3(topic, 7, rw.record_batch([(None, b"p7")]))))
        assert res is not None
        assert rw.parse_produce_v3_response(res[1]) == {
            (topic, 7): (rw.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    check()


def test_partial_frame_does_not_block_others(module_server, seeded):
    """A client that sends half a frame and goes quiet holds only its own connection;
    one that finishes the frame later is answered correctly."""
    _, check = seeded
    frame = rw.request(rw.API_API_VERSIONS, 0, 4711)
    with rw.Conn(module_server.port) as slow, rw.Conn(module_server.port) as stuck:
        stuck.send(struct.pack(">i", 5000) + b"\x00" * 100)  # never completed
        slow.send(frame[:7])
        time.sleep(0.5)
        check()  # served while both are pending
        slow.send(frame[7:])
        res = slow.recv_frame(timeout=10)
        assert res is not None and res[:4] == struct.pack(">i", 4711)


def test_client_gone_during_long_poll(module_server, seeded):
    """A consumer parked in a long-poll fetch disconnects; the later append must not
    trip the server over the dead connection."""
    from helpers.clienthelpers import kp_consumer
    from kafka import TopicPartition

    topic, check = seeded
    consumer = kp_consumer(module_server.bootstrap, fetch_max_wait_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 5)
    consumer.poll(timeout_ms=300)  # a fetch at the log end is now parked
    consumer.close()
    check()  # appends one record, wakes the parked fetch of the closed connection
    assert module_server.running


def test_many_connections_at_once(module_server):
    conns = [rw.Conn(module_server.port) for _ in range(200)]
    try:
        for i, c in enumerate(conns):
            c.send(rw.request(rw.API_API_VERSIONS, 0, i))
        for i, c in enumerate(conns):
            frame = c.recv_frame(timeout=20)
            assert frame is not None and frame[:4] == struct.pack(">i", i)
    finally:
        for c in conns:
            c.close()
    rw.api_versions_ok(module_server.port)
