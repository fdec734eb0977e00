"""Bad input at scale: hypothesis throws malformed frames at every API and version of a
real server process.

Each example starts from a valid, fully populated request (support.kafka_samples.sample) of
one served API key and version (plus unknown keys and versions out of range) and breaks
it: truncated bodies, huge or negative int32 lengths, invalid UTF-8, unterminated
varints, random bytes after a valid header, bit flips, or a size prefix that promises
more than is ever sent. Each goes on its own connection, followed by a valid ApiVersions
request: the server must answer it or close the connection, never hang on it for long.
Throughout, a separate well-behaved client is answered (each call within 10 s); afterwards the server
is alive, holds no leaked connections (file descriptors back to the baseline) and the
pre-existing topic's segment files are byte-identical.

CI runs ``FUZZ_EXAMPLES`` (default 2000) examples, derandomized (the same frames in every
run, however loaded the machine); the long form, with hypothesis's random choice of
examples, is ``python -m benchmarks.fuzz_api --examples 200000`` (docs/testing.md). The
number of frames tried is printed and attached to the report.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from helpers.clienthelpers import ck_produce
from helpers.kafka_samples import sample
from helpers.rawwire import api_versions_ok, request
from helpers.serverproc import HOST, ServerProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaproto import encode_request
from kafkaproto.messages import FetchRequest
from logserver.handlers import HANDLERS

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000"))

pytestmark = [pytest.mark.timeout(600 + EXAMPLES // 10)]  # a hang guard, long runs included
#: Hypothesis's own random choice of examples (benchmarks/fuzz_api.py), else a fixed set.
RANDOMIZE = os.environ.get("FUZZ_RANDOMIZE") == "1"
SERVED = sorted((int(k), h.min_version, h.max_version) for k, h in HANDLERS.items())
MUTATIONS = ["truncate", "huge-length", "negative-length", "bad-utf8", "bogus-varint",
             "random-body", "bitflip", "short-frame", "valid"]
PROBE_ID = 0x5EED


class Stats:
    frames = 0
    answered = 0
    closed = 0
    slow = 0
    by_mutation: dict[str, int] = {}


def _fd_count(pid: int) -> int:
    """Open sockets of the server process (listener + client connections)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def _segment_bytes(server: ServerProcess) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in server.segment_files("fuzz-data", 0)}


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    server = ServerProcess(base / "data", settings={"delete.topic.enable": False,
                                                    "num.partitions": 1})
    server.start()
    ck_produce(server.bootstrap, "fuzz-data", [{"value": b"keep-%d" % i} for i in range(200)])
    yield server
    server.stop()


def _valid_frame(api_key: int, version: int, seed: int) -> bytes:
    from kafkaproto import API_SPECS

    cls = API_SPECS[api_key].request
    msg = sample(cls, version, seed=seed, array_len=1 + seed % 3)
    if isinstance(msg, FetchRequest):
        msg.max_wait_ms = 0  # a sample's random wait would only slow the fuzzer down
    for name in ("timeout_ms", "rebalance_timeout_ms", "session_timeout_ms"):
        if hasattr(msg, name):
            setattr(msg, name, 100)
    return encode_request(api_key, version, seed & 0x7FFFFFFF, "fuzz", msg)


def _mutate(frame: bytes, mutation: str, data: st.DataObject) -> bytes:
    body = bytearray(frame[4:])
    n = len(body)
    pos = data.draw(st.integers(8, max(n - 1, 8)), label="pos") if n > 8 else 8
    if mutation == "truncate":
        body = body[: data.draw(st.integers(0, max(n - 1, 0)), label="cut")]
    elif mutation == "huge-length":
        body[pos:pos + 4] = struct.pack(">i", data.draw(st.sampled_from(
            [0x7FFFFFFF, 0x10000000, 65536, 0xFFFF])))
    elif mutation == "negative-length":
        body[pos:pos + 4] = struct.pack(">i", data.draw(st.sampled_from([-2, -100, -(2**31)])))
    elif mutation == "bad-utf8":
        body[pos:pos + 3] = data.draw(st.sampled_from([b"\xff\xfe\xfd", b"\xc0\x80\xed", b"\xed\xa0\x80"]))
    elif mutation == "bogus-varint":
        body[pos:pos] = b"\xff" * data.draw(st.integers(5, 12))
    elif mutation == "random-body":
        body = body[:8] + bytearray(data.draw(st.binary(min_size=0, max_size=300)))
    elif mutation == "bitflip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, max(n - 1, 0)))
            if i < len(body):
                body[i] ^= 1 << data.draw(st.integers(0, 7))
    return struct.pack(">i", len(body)) + bytes(body)


def _send_and_probe(port: int, payload: bytes, *, promise_more: bool) -> str:
    """Send one fuzzed frame then an ApiVersions probe; 'answered', 'closed' or 'slow'."""
    sock = socket.create_connection((HOST, port), timeout=5)
    try:
        if promise_more:  # the size prefix promises more than is ever sent; then we go away
            sock.sendall(struct.pack(">i", len(payload) + 1000) + payload[4:])
            return "closed"
        sock.sendall(payload + request(18, 0, PROBE_ID))
        sock.settimeout(2.0)
        buf = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return "closed"
            except TimeoutError:
                return "slow"
            if not chunk:
                return "closed"
            buf += chunk
            while len(buf) >= 8:
                size, corr = struct.unpack_from(">ii", buf)
                if len(buf) < 4 + size:
                    break
                if corr == PROBE_ID:
                    return "answered"
                buf = buf[4 + size:]
    finally:
        sock.close()


def test_fuzz_every_api_and_version(fuzz_server, record_property):
    server = fuzz_server
    assert server.pid is not None
    before = _segment_bytes(server)
    api_versions_ok(server.port)
    time.sleep(0.2)
    fd_baseline = _fd_count(server.pid)

    # a well-behaved client, answered throughout
    latencies: list[float] = []
    failures: list[str] = []
    stop = threading.Event()

    def valid_client() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                api_versions_ok(server.port)
                latencies.append(time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                failures.append(repr(exc))
            time.sleep(0.05)

    watcher = threading.Thread(target=valid_client, daemon=True)
    watcher.start()

    targets = [(k, v) for k, lo, hi in SERVED for v in range(lo, hi + 1)]
    stats = Stats()
    stats.by_mutation = {}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOMIZE, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one_frame(data: st.DataObject) -> None:
        mutation = data.draw(st.sampled_from(MUTATIONS), label="mutation")
        kind = data.draw(st.sampled_from(["served"] * 8 + ["bad-version", "unknown-key"]))
        api_key, version = data.draw(st.sampled_from(targets), label="api")
        if kind == "bad-version":
            version = data.draw(st.sampled_from([-1, HANDLERS[api_key].max_version + 1, 32767]))
            frame = request(api_key, version & 0x7FFF, 1, b"\x00" * 16)
        elif kind == "unknown-key":
            frame = request(data.draw(st.sampled_from([24, 25, 68, 999, -1 & 0x7FFF])), 0, 1, b"")
        else:
            frame = _valid_frame(api_key, version, data.draw(st.integers(0, 10_000)))
        payload = frame if mutation == "valid" else _mutate(frame, mutation, data)
        outcome = _send_and_probe(server.port, payload, promise_more=mutation == "short-frame")
        stats.frames += 1
        stats.by_mutation[mutation] = stats.by_mutation.get(mutation, 0) + 1
        if outcome == "answered":
            stats.answered += 1
        elif outcome == "closed":
            stats.closed += 1
        else:
            stats.slow += 1
        assert server.running, f"server died on {mutation} of api {api_key} v{version}"

    started = time.monotonic()
    try:
        one_frame()
    finally:
        stop.set()
        watcher.join(timeout=10)
    elapsed = time.monotonic() - started

    summary = (f"fuzz: {stats.frames} malformed/valid frames over {len(targets)} API versions "
               f"in {elapsed:.0f}s: {stats.answered} answered, {stats.closed} closed by the server, "
               f"{stats.slow} slower than 2s; by mutation {stats.by_mutation}; valid client "
               f"answered {len(latencies)} times, slowest {max(latencies, default=0) * 1000:.0f} ms")
    print(summary)
    record_property("fuzz_figures", summary)

    assert server.running
    assert not failures, failures[:3]
    # answered throughout: each call of the valid client had rawwire's 10 s deadline
    assert latencies, "the valid client was never answered"
    assert stats.slow <= stats.frames // 100, summary
    deadline = time.monotonic() + 10
    while _fd_count(server.pid) > fd_baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _fd_count(server.pid) <= fd_baseline, "connections leaked"
    assert _segment_bytes(server) == before, "the fuzzed requests changed the existing log"
    crashes = server.output().count("internal error")
    assert crashes == 0, f"{crashes} requests crashed a handler (see 'internal error' in the log)"
    api_versions_ok(server.port)
    assert server.stop() == 0
    assert Path(server.data_dir, ".kafka_cleanshutdown").exists()
