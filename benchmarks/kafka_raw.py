"""A minimal blocking Kafka client on ``kafkaproto``, for figures librdkafka would hide.

librdkafka parses and copies every record it fetches, so its consumer measures the
client as much as the server. This client sends Fetch requests and only walks batch
*headers* (to learn the next offset), receiving into one reusable buffer, as the
loopback baseline does: what it measures is the server's fetch path (sendfile).
It also keeps idle connections and times request round trips for the connection
workload. Blocking sockets, 127.0.0.1 only, one request in flight per connection.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from kafkaproto import ApiKey, decode_response, encode_request
from kafkaproto.batch import LOG_OVERHEAD, peek_offset_and_size
from kafkaproto.messages import ApiVersionsRequest, FetchRequest

_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">qi11xi")  # base offset, length, last offset delta
CLIENT_ID = "logserver-bench-raw"


class RawClientError(RuntimeError):
    """The server answered something this client cannot use."""


class RawConnection:
    """One blocking connection: framed requests out, whole response frames in."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, buffer_bytes: int = 1 << 20) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray(buffer_bytes)
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: object) -> int:
        """Sends one request; returns its correlation id."""
        self._correlation += 1
        frame = encode_request(api_key, version, self._correlation, CLIENT_ID, body)  # type: ignore[arg-type]
        self.sock.sendall(frame)
        return self._correlation

    def receive(self) -> memoryview:
        """One whole response frame (size prefix stripped), valid until the next call.

        The buffer grows to the largest frame seen and is then reused, so a catch-up
        read allocates nothing per response.
        """
        sock = self.sock
        head = bytearray(4)
        got = 0
        while got < 4:
            n = sock.recv_into(memoryview(head)[got:])
            if n == 0:
                raise ConnectionError("server closed the connection")
            got += n
        (size,) = _SIZE.unpack(head)
        if size > len(self._buf):
            self._buf = bytearray(size)
        view = memoryview(self._buf)[:size]
        got = 0
        recv_into = sock.recv_into
        while got < size:
            n = recv_into(view[got:])
            if n == 0:
                raise ConnectionError("server closed the connection mid-frame")
            got += n
        return view

    def request(self, api_key: int, version: int, body: object) -> object:
        """A round trip; returns the decoded response body."""
        correlation = self.send(api_key, version, body)
        frame = self.receive()
        got, response = decode_response(api_key, version, frame)
        if got != correlation:
            raise RawClientError(f"correlation id {got}, expected {correlation}")
        return response

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0 (every server answers it): key -> (min, max) supported."""
        response = self.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
        return self.versions

    def version_for(self, api_key: int, lo: int, hi: int) -> int:
        """The newest version in ``lo..hi`` that the server also serves."""
        if not self.versions:
            self.negotiate()
        smin, smax = self.versions.get(api_key, (0, -1))
        version = min(hi, smax)
        if version < max(lo, smin):
            raise RawClientError(f"no common version of API {api_key} in {lo}..{hi}")
        return version


@dataclass
class FetchProgress:
    """What a raw catch-up read got."""

    bytes: int = 0  # record-batch bytes received
    records: int = 0  # offsets covered (batches' last offset deltas + 1)
    fetches: int = 0
    next_offset: int = 0


def catch_up(
    bootstrap: str,
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
    *,
    max_bytes: int = 64 << 20,
    time_cap: float = 30.0,
    on_progress: object = None,
) -> tuple[FetchProgress, float]:
    """Fetches ``[start_offset, end_offset)`` as fast as one connection can; (progress, s).

    Walks only batch headers of each response (about one per MB with the producer
    settings used here) to find the next offset; record bytes are never touched.
    """
    progress = FetchProgress(next_offset=start_offset)
    with RawConnection(bootstrap, buffer_bytes=max_bytes + (1 << 20)) as conn:
        version = conn.version_for(ApiKey.FETCH, 4, 11)
        start = time.perf_counter()
        deadline = start + time_cap
        while progress.next_offset < end_offset and time.perf_counter() < deadline:
            request = FetchRequest(
                replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition, current_leader_epoch=-1,
                        fetch_offset=progress.next_offset, log_start_offset=-1,
                        partition_max_bytes=max_bytes)])],
                forgotten_topics_data=[], rack_id="",
            )  # fmt: skip
            response = conn.request(ApiKey.FETCH, version, request)
            data = response.responses[0].partitions[0]  # type: ignore[attr-defined]
            if data.error_code:
                raise RawClientError(f"fetch error code {data.error_code}")
            records = data.records
            if records is None or len(records) == 0:
                continue
            progress.fetches += 1
            pos, n, offset = 0, len(records), progress.next_offset
            while pos + LOG_OVERHEAD <= n:
                base, size = peek_offset_and_size(records, pos)
                if pos + size > n:
                    break  # a partial batch at the end (Kafka may cut one): fetch it again
                if pos + 27 <= n:
                    offset = base + _PEEK.unpack_from(records, pos)[2] + 1
                pos += size
            progress.bytes += pos
            progress.records += offset - progress.next_offset
            progress.next_offset = offset
            if callable(on_progress):
                on_progress(progress)
        return progress, time.perf_counter() - start


def open_idle(bootstrap: str, count: int) -> list[RawConnection]:
    """``count`` connections that each completed an ApiVersions exchange, then idle."""
    conns: list[RawConnection] = []
    try:
        for _ in range(count):
            conn = RawConnection(bootstrap, timeout=30.0, buffer_bytes=4096)
            conns.append(conn)
            conn.negotiate()
    except BaseException:
        for conn in conns:
            conn.close()
        raise
    return conns


def round_trips(bootstrap: str, count: int) -> list[float]:
    """Seconds of ``count`` sequential ApiVersions round trips on one connection."""
    out: list[float] = []
    with RawConnection(bootstrap) as conn:
        conn.negotiate()
        body = ApiVersionsRequest()
        for _ in range(count):
            t0 = time.perf_counter()
            conn.request(ApiKey.API_VERSIONS, 0, body)
            out.append(time.perf_counter() - t0)
    return out
