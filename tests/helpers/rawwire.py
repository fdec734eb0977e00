"""Kafka frames written by hand with ``struct``, for bad-input tests over a raw socket.

Deliberately independent of ``kafkaproto`` (the code under test): only the few
non-flexible message versions the tests need.
"""

from __future__ import annotations

import socket
import struct
import time

import crc32c

HOST = "127.0.0.1"

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_API_VERSIONS = 18
API_INIT_PRODUCER_ID = 22

UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_RECORD = 87


# ------------------------------------------------------------------ primitives
def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def nbytes(b: bytes | None) -> bytes:
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)  # zig-zag
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def remaining(self):
        return len(self.data) - self.pos


# ------------------------------------------------------------------ frames
def request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
            client_id: str | None = "rawwire-test", flexible: bool = False) -> bytes:
    """A size-prefixed request: header v1 (v2 when ``flexible``: plus an empty tag buffer)."""
    header = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)
    if flexible:
        header += b"\x00"
    payload = header + body
    return i32(len(payload)) + payload


def record_batch(values: list[tuple[bytes | None, bytes | None]], base_timestamp: int | None = None,
                 corrupt_crc: bool = False, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, attributes: int = 0, magic: int = 2,
                 last_offset_delta: int | None = None, record_count: int | None = None) -> bytes:
    """A magic-2 record batch, uncompressed, base offset 0 (no producer id by default)."""
    ts = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    recs = b""
    for delta, (key, value) in enumerate(values):
        body = i8(0) + varint(0) + varint(delta)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(-1) if value is None else varint(len(value)) + value  # None: a tombstone
        body += varint(0)  # headers
        recs += varint(len(body)) + body
    if last_offset_delta is None:
        last_offset_delta = len(values) - 1
    if record_count is None:
        record_count = len(values)
    after_crc = (
        i16(attributes)
        + i32(last_offset_delta)
        + i64(ts) + i64(ts)  # base/max timestamp
        + i64(producer_id) + i16(producer_epoch) + i32(base_sequence)
        + i32(record_count)
        + recs
    )
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_length = i32(-1) + i8(magic) + struct.pack(">I", crc) + after_crc
    return i64(0) + i32(len(after_length)) + after_length


def produce_v3(topic: str, partition: int, records: bytes, acks: int = -1,
               timeout_ms: int = 10000) -> bytes:
    return (string(None) + i16(acks) + i32(timeout_ms) + i32(1) + string(topic)
            + i32(1) + i32(partition) + nbytes(records))


def parse_produce_v3_response(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error_code, base_offset)}"""
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err = r.i16()
            base = r.i64()
            r.i64()  # log_append_time_ms
            out[(name, p)] = (err, base)
    r.i32()  # throttle_time_ms
    return out


def init_producer_id_v0(transaction_timeout_ms: int = 60000) -> bytes:
    return string(None) + i32(transaction_timeout_ms)


def parse_init_producer_id_v0(body: bytes) -> tuple[int, int, int]:
    """(error_code, producer_id, producer_epoch)"""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    return r.i16(), r.i64(), r.i16()


def metadata_v4(topics: list[str] | None, allow_auto_topic_creation: bool) -> bytes:
    arr = i32(-1) if topics is None else i32(len(topics)) + b"".join(map(string, topics))
    return arr + i8(1 if allow_auto_topic_creation else 0)


def parse_metadata_v4(body: bytes) -> dict:
    """{'brokers': [(id, host, port)], 'controller_id': int,
        'topics': {name: (error_code, {partition: (error_code, leader)})}}"""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    brokers = []
    for _ in range(r.i32()):
        node, host, port = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers.append((node, host, port))
    r.string()  # cluster_id
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.take(">b")  # is_internal
        parts = {}
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):  # replicas
                r.i32()
            for _ in range(r.i32()):  # isr
                r.i32()
            parts[idx] = (perr, leader)
        topics[name] = (err, parts)
    return {"brokers": brokers, "controller_id": controller, "topics": topics}


def fetch_v4(topic: str, offsets: dict[int, int], *, max_wait_ms: int = 0,
             min_bytes: int = 1, partition_max_bytes: int = 1 << 20) -> bytes:
    """Fetch v4 body (read_uncommitted) of ``{partition: offset}`` of one topic; with
    ``max_wait_ms`` and less than ``min_bytes`` there, the server parks it that long."""
    parts = b"".join(i32(p) + i64(o) + i32(partition_max_bytes) for p, o in offsets.items())
    return (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(64 << 20) + i8(0)
            + i32(1) + string(topic) + i32(len(offsets)) + parts)


def parse_fetch_v4(body: bytes) -> list[tuple[str, int, int, int]]:
    """[(topic, partition, error_code, record bytes)] of a Fetch v4 response body."""
    r = Reader(body)
    r.i32()  # throttle_time_ms
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            partition, error = r.i32(), r.i16()
            r.i64()  # high watermark
            r.i64()  # last stable offset
            aborted = r.i32()  # aborted transactions: (producer id, first offset) each
            r.pos += max(aborted, 0) * 16
            size = r.i32()
            r.pos += max(size, 0)
            out.append((topic, partition, error, max(size, 0)))
    return out


def parse_api_versions_v0(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error_code, {api_key: (min, max)}) of a v0-encoded ApiVersions response body."""
    r = Reader(body)
    err = r.i16()
    n = r.i32()
    keys = {}
    for _ in range(max(n, 0)):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    return err, keys


# ------------------------------------------------------------------ connection
class Conn:
    """A raw client connection to 127.0.0.1:port (from ``source``, another loopback
    address such as 127.0.0.2, when given)."""

    def __init__(self, port: int, timeout: float = 10.0, source: str | None = None):
        self.sock = socket.create_connection((HOST, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes) -> bool:
        """Send bytes; False if the server already closed the connection."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def recv_frame(self, timeout: float | None = None) -> bytes | None:
        """One response frame (without the size prefix), or None if the server closed
        the connection. Raises ``socket.timeout`` when nothing came in ``timeout``."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        head = self._recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        assert 0 <= size < 64 * 1024 * 1024, f"implausible response size {size}"
        data = self._recv_exact(size)
        assert data is not None, "connection closed in the middle of a response frame"
        return data

    def call(self, frame: bytes, timeout: float | None = None) -> tuple[int, bytes] | None:
        """Send a request, return (correlation_id, body after the v0 response header),
        or None if the connection was closed instead."""
        if not self.send(frame):
            return None
        data = self.recv_frame(timeout)
        if data is None:
            return None
        (corr,) = struct.unpack_from(">i", data)
        return corr, data[4:]

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """True if the server closes the connection within ``timeout`` (any unread data
        before the close is returned by ``recv`` first and ignored here)."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return False


def api_versions_ok(port: int | None = None, conn: Conn | None = None, correlation_id: int = 7):
    """ApiVersions v0 on ``conn`` (or a new connection): returns {api_key: (min, max)}."""
    own = conn is None
    c = Conn(port) if own else conn
    try:
        res = c.call(request(API_API_VERSIONS, 0, correlation_id))
        assert res is not None, "server closed a healthy connection on ApiVersions v0"
        corr, body = res
        assert corr == correlation_id
        err, keys = parse_api_versions_v0(body)
        assert err == 0, f"ApiVersions v0 error {err}"
        return keys
    finally:
        if own:
            c.close()


# ------------------------------------------------------------ 2. bytes in flight
def fetch_v4_repeated(topic: str, partition: int, offset: int, max_bytes: int,
              repeat: int = 1) -> bytes:
    """Fetch v4 body naming (topic, partition) ``repeat`` times."""
    one = i32(partition) + i64(offset) + i32(max_bytes)
    return (i32(-1) + i32(0) + i32(1) + i32(64 << 20) + i8(0)
            + i32(1) + string(topic) + i32(repeat) + one * repeat)


def produce_each(port: int, topic: str, partition: int, values: list[bytes]) -> None:
    with Conn(port) as c:
        for i, value in enumerate(values):
            res = c.call(request(API_PRODUCE, 3, i + 1, produce_v3(
                topic, partition, record_batch([(None, value)]))))
            assert res is not None
            assert parse_produce_v3_response(res[1])[(topic, partition)][0] == 0


# ------------------------------------------------------------ 5. topic names and files
def create_topic_v5(port: int, name: str, partitions: int = 1,
                  configs: dict[str, str] | None = None) -> tuple[int, str | None]:
    from kafkaproto import decode_response, encode_request
    from kafkaproto.messages import CreateTopicsRequest

    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])],
        timeout_ms=30000, validate_only=False)
    with Conn(port, timeout=60) as c:
        assert c.send(encode_request(19, 5, 1, "bounded", req))
        frame = c.recv_frame()
    assert frame is not None
    _, response = decode_response(19, 5, frame)
    return response.topics[0].error_code, response.topics[0].error_message
