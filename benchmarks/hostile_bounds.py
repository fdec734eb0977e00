"""What hostile clients make the server hold (issue 11, bounded resources), before/after.

Three attacks, each on a fresh server, measured from outside in ``/proc/<pid>`` (bytes
and counts, not timings):

- ``prefixes``: 20 sockets each send a size prefix announcing a 100 MB frame and 6
  bytes of it; the figure is the server's RSS growth (MB).
- ``dup-fetch``: one Fetch naming a partition 1,900 times; the response size (MB).
- ``fds``: 40 partitions of 6 segments each, server restarted; descriptors it holds
  beyond an empty server's.

    python -m benchmarks.hostile_bounds [--runs 3] [--source DIR] [--attacks a,b]

``--source`` runs the server from another source tree (e.g. ``git archive`` of an
older commit) for the "before" figures. Each figure is a size, not a speed:
min/median/max over ``--runs`` fresh servers. (The client that never reads is measured
by tests/integration/test_bounded_resources.py, whose RSS figure this harness did not reproduce.)
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.stats import Spread
from kafkaproto import decode_response, encode_request
from kafkaproto.messages import CreateTopicsRequest, ProduceRequest
from kafkaproto.records import build_batch

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class _Server:
    def __init__(self, source: Path, data_dir: Path, settings: dict[str, str]) -> None:
        self.source, self.data_dir, self.settings = source, data_dir, settings
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> _Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSERVER_")}
        env["PYTHONPATH"] = str(self.source)
        cmd = [sys.executable, "-m", "logserver", "--log.dirs", str(self.data_dir),
               "--listeners", f"PLAINTEXT://{HOST}:{self.port}"]
        for name, value in self.settings.items():
            cmd += [f"--{name}", value]
        self.proc = subprocess.Popen(cmd, cwd=self.source, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        _until(lambda: _connects(self.port), "the server to listen", self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def unread(self) -> list[int]:
        """Bytes not yet read by the server on each of its established connections."""
        out = []
        for line in Path(f"/proc/{self.pid}/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == self.port and fields[3] == "01":
                out.append(int(fields[4].split(":")[1], 16))
        return out


def _connects(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def _until(condition: Callable[[], object], what: str,
           proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _call(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    head = _exact(sock, 4)
    return _exact(sock, struct.unpack(">i", head)[0])


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _create(port: int, topic: str, partitions: int) -> None:
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[])], timeout_ms=30000, validate_only=False)
    with socket.create_connection((HOST, port)) as sock:
        body = _call(sock, encode_request(19, 5, 1, "bench", req))
    code = decode_response(19, 5, body)[1].topics[0].error_code
    if code:
        raise RuntimeError(f"CreateTopics {topic}: error {code}")


def _produce(port: int, topic: str, partitions: int, batches: int, size: int) -> None:
    with socket.create_connection((HOST, port)) as sock:
        for p in range(partitions):
            for i in range(batches):
                batch = build_batch([(None, bytes([65 + i % 26]) * size, [], int(time.time() * 1000))])
                req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
                    ProduceRequest.TopicProduceData(name=topic, partition_data=[
                        ProduceRequest.PartitionProduceData(index=p, records=batch)])])
                _call(sock, encode_request(0, 7, 1, "bench", req))


def _fetch_frame(topic: str, partition: int, max_bytes: int, repeat: int = 1) -> bytes:
    """Fetch v4, written by hand so a partition can be named ``repeat`` times."""
    name = topic.encode()
    one = struct.pack(">iqi", partition, 0, max_bytes)
    body = (struct.pack(">iiiib", -1, 0, 1, 256 << 20, 0) + struct.pack(">i", 1)
            + struct.pack(">h", len(name)) + name + struct.pack(">i", repeat) + one * repeat)
    header = struct.pack(">hhih", 1, 4, 7, 5) + b"bench"
    return struct.pack(">i", len(header) + len(body)) + header + body


# ---------------------------------------------------------------- attacks
def prefixes(server: _Server) -> float:
    before = server.rss_mb()
    socks = []
    try:
        for _ in range(20):
            sock = socket.create_connection((HOST, server.port))
            sock.sendall(struct.pack(">i", 100_000_000) + b"\x00\x12\x00\x00\x00\x01")
            socks.append(sock)
        _until(lambda: len(server.unread()) == 20, "20 connections")
        # read as far as the server will: nothing left unread, or stable for a moment
        last: list[int] = []
        stable_since = time.monotonic()
        while time.monotonic() - stable_since < 1.0 and any(server.unread()):
            now = server.unread()
            if now != last:
                last, stable_since = now, time.monotonic()
            time.sleep(0.05)
        return server.rss_mb() - before
    finally:
        for sock in socks:
            sock.close()


def dup_fetch(server: _Server) -> float:
    _create(server.port, "dup", 1)
    _produce(server.port, "dup", 1, 2, 57_000)
    with socket.create_connection((HOST, server.port)) as sock:
        sock.sendall(_fetch_frame("dup", 0, 1 << 20, repeat=1900))
        size = struct.unpack(">i", _exact(sock, 4))[0]
    return size / 1e6


def fds(server: _Server) -> float:
    empty = server.fds()
    _create(server.port, "seg", 40)
    _produce(server.port, "seg", 40, 6, 1500)
    server.stop()
    server.start()
    _until(lambda: _connects(server.port), "the restart")
    return server.fds() - empty


ATTACKS: dict[str, tuple[Callable[[_Server], float], dict[str, str], str]] = {
    "prefixes": (prefixes, {}, "MB RSS growth"),
    "dup-fetch": (dup_fetch, {}, "MB response"),
    "fds": (fds, {"log.segment.bytes": "2048"}, "descriptors for 40 partitions x 6 segments"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", type=Path, default=REPO_ROOT)
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    args = parser.parse_args(argv)
    for name in args.attacks.split(","):
        attack, settings, unit = ATTACKS[name]
        values = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
                server = _Server(args.source.resolve(), Path(tmp) / "data", settings).start()
                try:
                    values.append(attack(server))
                finally:
                    server.stop()
        spread = Spread.of(values)
        print(f"{name:12} median {spread.median:9.2f}  [{spread.low:.2f}-{spread.high:.2f}]  "
              f"{unit}  ({spread.runs} runs, source {args.source})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
