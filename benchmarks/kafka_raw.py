"""A minimal blocking Kafka client on ``kafkaproto``, for figures librdkafka would hide.

librdkafka parses and copies every record it fetches, so its consumer measures the
client as much as the server. This client sends Fetch requests and only walks batch
*headers* (to learn the next offset), receiving into one reusable buffer, as the
loopback baseline does: what it measures is the server's fetch path (sendfile).
It also keeps idle connections and times request round trips for the connection
workload. 127.0.0.1 only: the project's blocking client (commonlib.kafkaclient, on the
sans-I/O core ``kafkaproto.client``) with a reused receive buffer and a streaming read.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass

from commonlib.kafkaclient import BlockingConnection, KafkaError, parse_bootstrap
from kafkaproto import ApiKey, encode_request
from kafkaproto.batch import LOG_OVERHEAD
from kafkaproto.client import ClientConnection, Response
from kafkaproto.messages import ApiVersionsRequest, FetchRequest, ProduceRequest
from kafkaproto.records import build_batch

_PEEK = struct.Struct(">qi11xi")  # base offset, length, last offset delta
CLIENT_ID = "logserver-bench-raw"


class RawClientError(RuntimeError):
    """The server answered something this client cannot use."""


class RawConnection(BlockingConnection):
    """The project's blocking client on one bootstrap address, with the benchmarks' reads:
    whole response frames into one reused buffer (``receive_frame``), or streamed."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, buffer_bytes: int = 1 << 20) -> None:
        host, port = parse_bootstrap(bootstrap)[0]
        super().__init__(host, port, client_id=CLIENT_ID, timeout=timeout,
                         buffer_bytes=buffer_bytes)

    def __enter__(self) -> RawConnection:
        return self

    def receive_response(self) -> Response:
        """The next response, matched to its request and decoded (views valid until the next)."""
        response = self.core.receive_frame(self.receive_frame())
        if response.error is not None:
            raise RawClientError(f"undecodable response: {response.error}")
        return response

    def version_for(self, api_key: int, lo: int, hi: int) -> int:
        """The newest version in ``lo..hi`` that the server also serves."""
        try:
            version = self.version(api_key, hi)
        except KafkaError as exc:
            raise RawClientError(f"no common version of API {api_key}: {exc}") from exc
        if version < lo:
            raise RawClientError(f"no common version of API {api_key} in {lo}..{hi}")
        return version


@dataclass
class FetchProgress:
    """What a raw catch-up read got."""

    bytes: int = 0  # record-batch bytes received
    records: int = 0  # offsets covered (batches' last offset deltas + 1)
    fetches: int = 0
    next_offset: int = 0


class _Stream:
    """Reads a response frame piecewise: small fields, then record bytes in chunks."""

    def __init__(self, sock: socket.socket, chunk: bytearray) -> None:
        self.sock = sock
        self.chunk = chunk
        self.view = memoryview(chunk)

    def exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("server closed the connection")
            got += k
        return bytes(buf)

    def int16(self) -> int:
        return int.from_bytes(self.exact(2), "big", signed=True)

    def int32(self) -> int:
        return int.from_bytes(self.exact(4), "big", signed=True)


def _fetch_streaming(stream: _Stream, core: ClientConnection, version: int,
                     start_offset: int) -> tuple[int, int]:
    """Reads one single-partition Fetch response (v4-v11); returns (record bytes, next offset).

    Record bytes go through one 1 MiB buffer, as in the loopback baseline: a client that
    kept 64 MiB responses whole would measure its own cache misses. Only the 27 leading
    bytes of each batch are looked at, to learn where it ends and its last offset.
    """
    size = stream.int32()
    core.claim(stream.int32())  # the response to the oldest request, or an error
    stream.exact(4)  # throttle time
    size -= 8
    if version >= 7:
        error, _session = stream.int16(), stream.int32()
        size -= 6
        if error:
            raise RawClientError(f"fetch error code {error}")
    if stream.int32() != 1:
        raise RawClientError("expected one topic in the fetch response")
    name_len = stream.int16()
    stream.exact(name_len)
    size -= 4 + 2 + name_len
    if stream.int32() != 1:
        raise RawClientError("expected one partition in the fetch response")
    fixed = stream.exact(4 + 2 + 8 + 8 + (8 if version >= 5 else 0))
    size -= 4 + len(fixed)
    error = int.from_bytes(fixed[4:6], "big", signed=True)
    aborted = stream.int32()
    size -= 4
    if aborted > 0:
        stream.exact(16 * aborted)
        size -= 16 * aborted
    if version >= 11:
        stream.int32()
        size -= 4
    length = stream.int32()
    size -= 4
    if error:
        raise RawClientError(f"fetch error code {error}")
    if length <= 0:
        return 0, start_offset
    if size != length:
        raise RawClientError(f"records field of {length} bytes, frame holds {size}")
    # Stream the records, noting each batch header as it passes.
    sock, view, cap = stream.sock, stream.view, len(stream.chunk)
    header = bytearray(27)
    have_header = 0  # bytes of the current batch's first 27 already in ``header``
    batch_start = 0  # position (in the records field) of the current batch
    batch_end = -1  # its end, once known
    received = 0
    complete_end, offset = 0, start_offset
    while received < length:
        n = sock.recv_into(view[: min(cap, length - received)])
        if n == 0:
            raise ConnectionError("server closed the connection mid-records")
        chunk_start, chunk_end = received, received + n
        received = chunk_end
        while True:
            if have_header < 27:
                pos = batch_start + have_header  # next header byte we need
                if pos >= chunk_end:
                    break
                take = min(27 - have_header, chunk_end - pos)
                header[have_header : have_header + take] = view[pos - chunk_start : pos - chunk_start + take]
                have_header += take
                if have_header < 27:
                    break
                base, blen, last_delta = _PEEK.unpack(header)
                batch_end = batch_start + blen + LOG_OVERHEAD
                last_offset = base + last_delta + 1
            if batch_end > chunk_end:
                break
            if batch_end <= length:
                complete_end, offset = batch_end, last_offset
            batch_start, have_header = batch_end, 0
            if batch_start + LOG_OVERHEAD > length:
                break
    return complete_end, offset


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

    Each response streams through a 1 MiB buffer; record bytes are never parsed beyond
    the batch headers that give the next offset (about one per MB here).
    """
    progress = FetchProgress(next_offset=start_offset)
    with RawConnection(bootstrap, buffer_bytes=4096) as conn:
        version = conn.version_for(ApiKey.FETCH, 4, 11)
        stream = _Stream(conn.sock, bytearray(1 << 20))
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
            conn.send(ApiKey.FETCH, version, request)
            nbytes, offset = _fetch_streaming(stream, conn.core, version, progress.next_offset)
            if nbytes == 0:
                continue
            progress.fetches += 1
            progress.bytes += nbytes
            progress.records += offset - progress.next_offset
            progress.next_offset = offset
            if callable(on_progress):
                on_progress(progress)
        return progress, time.perf_counter() - start


def produce_batches(
    bootstrap: str,
    topic: str,
    record_size: int,
    total_bytes: int,
    *,
    batch_bytes: int = 1_000_000,
    in_flight: int = 4,
    acks: int = 1,
    time_cap: float = 30.0,
    on_progress: object = None,
) -> tuple[int, int, float]:
    """Sends ready-made 1 MB batches of ``record_size``-byte records to partition 0.

    The producer-side twin of ``catch_up``: what librdkafka's per-record ``produce()``
    calls cost the client (a Python call and a copy per record, on the same 2 cores) is
    gone, so the figure is the server's produce path (decode, CRC check, offset patch,
    append), with ``in_flight`` requests pipelined as a producer does. The same batch is
    sent each time: the server assigns offsets, so that is legal. Returns
    (records acknowledged, payload bytes acknowledged, seconds).
    """
    per_batch = max(1, batch_bytes // (record_size + 16))  # under max.message.bytes
    value = os.urandom(record_size)
    batch = build_batch([(None, value, [], int(time.time() * 1000))] * per_batch)
    records = acked = 0
    with RawConnection(bootstrap) as conn:
        version = conn.version_for(ApiKey.PRODUCE, 3, 9)
        request = ProduceRequest(
            transactional_id=None, acks=acks, timeout_ms=30_000,
            topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])],
        )  # fmt: skip
        frame = encode_request(ApiKey.PRODUCE, version, 0, CLIENT_ID, request)
        start = time.perf_counter()
        deadline = start + time_cap
        pending = 0
        wanted = max(1, total_bytes // (per_batch * record_size))
        sent = 0
        while acked < wanted:
            while pending < in_flight and sent < wanted and time.perf_counter() < deadline:
                conn.resend(ApiKey.PRODUCE, version, frame)
                pending += 1
                sent += 1
            if not pending:
                break
            body = conn.receive_response().body
            part = body.responses[0].partition_responses[0]  # type: ignore[union-attr]
            if part.error_code:
                raise RawClientError(f"produce error code {part.error_code}")
            pending -= 1
            acked += 1
            records += per_batch
            if callable(on_progress):
                on_progress(records)
        elapsed = time.perf_counter() - start
    return records, records * record_size, elapsed


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
