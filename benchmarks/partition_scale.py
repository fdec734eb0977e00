"""Partitions per broker: creation time, descriptors, memory and start-up at 1k-50k partitions.

For each partition count, a fresh server runs under ``ulimit -n`` (``--nofile``, set with
``resource.setrlimit`` in the child before the server starts) on a fresh data directory:

- ``create_s``: one CreateTopics of N partitions, request to response, and
  ``create_cpu_s`` the server's CPU time meanwhile (on a shared machine the wall-clock
  figure mostly measures the other processes);
- ``fds_created`` / ``rss_per_partition_kb``: ``/proc/PID/fd`` entries and VmRSS growth
  per partition after the creation;
- ``fds_written``: descriptors after one small batch was produced to every partition
  and every partition was read back from offset 0 (bounded by ``log.file.handles.max``,
  not by N);
- ``startup_s``: a clean restart (SIGTERM, start again) until the port accepts and a
  Metadata request names the topic, and ``startup_cpu_s`` the server's CPU time from
  exec to that answer; ``empty_startup_cpu_s`` the same for the first start, on an
  empty data directory (interpreter and imports: what N partitions add is the
  difference); ``fds_started`` after it.

With ``--peers tansu`` Tansu (memory storage, so no restart) is measured on the
creation too, in alternating order; every figure is min/median/max over ``--rounds``.

    python -m benchmarks.partition_scale --partitions 1000,10000,50000 [--rounds 3]
        [--nofile 20000] [--peers tansu] [--source DIR]

``--source`` runs the server from another source tree (an export of an older commit)
for a "before" figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.kafka_raw import RawConnection
from kafkaproto import ApiKey
from kafkaproto.messages import (
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkaproto.records import build_batch

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
TOPIC = "scale"
_CHUNK = 1000  # partitions per Produce / Fetch request


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process so far (the figure a loaded machine
    does not inflate, unlike wall-clock time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _limited(nofile: int, argv: list[str]) -> list[str]:
    """``argv`` run under ``ulimit -n nofile`` (soft and hard)."""
    code = ("import os, resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
            "os.execvp(sys.argv[1], sys.argv[1:])")
    return [sys.executable, "-c", code, *argv]


def _wait_port(proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: "
                               f"{log_path.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Server:
    """One logserver (or Tansu) process under the descriptor limit."""

    def __init__(self, kind: str, source: Path, workdir: Path, nofile: int) -> None:
        self.kind, self.source, self.workdir, self.nofile = kind, source, workdir, nofile
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        if self.kind == "tansu":
            from benchmarks.peers import ensure_tansu
            url = f"tcp://{HOST}:{self.port}"
            return [str(ensure_tansu()), "broker", "--storage-engine=memory://tansu/",
                    f"--kafka-listener-url={url}", f"--kafka-advertised-listener-url={url}"]
        return [sys.executable, "-m", "logserver", "--log.dirs", str(self.workdir / "data"),
                "--listeners", f"PLAINTEXT://{HOST}:{self.port}", "--max.partitions", "1000000",
                "--log-level", "WARNING"]

    def start(self) -> float:
        """Seconds from exec to a served Metadata request."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSERVER_")}
        env.pop("RUST_LOG", None)
        env["PYTHONPATH"] = str(self.source)
        log_path = self.workdir / f"{self.kind}.log"
        started = time.perf_counter()
        with open(log_path, "ab") as log_file:
            self.proc = subprocess.Popen(_limited(self.nofile, self.argv()), cwd=self.source,
                                         env=env, stdout=log_file, stderr=subprocess.STDOUT)
        _wait_port(self.proc, self.port, log_path, 900)
        with RawConnection(self.bootstrap, timeout=600) as conn:
            conn.request(ApiKey.METADATA, 1, MetadataRequest(topics=[]))
        return time.perf_counter() - started

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


def _create(bootstrap: str, partitions: int) -> float:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=600_000, validate_only=False)
    with RawConnection(bootstrap, timeout=900) as conn:
        started = time.perf_counter()
        response = conn.request(ApiKey.CREATE_TOPICS, 5, request)
        elapsed = time.perf_counter() - started
    error = response.topics[0].error_code  # type: ignore[attr-defined]
    if error:
        raise RuntimeError(f"CreateTopics of {partitions} partitions failed with error {error}")
    return elapsed


def _produce_all(bootstrap: str, partitions: int) -> None:
    batch = build_batch([(None, b"x" * 100, [], int(time.time() * 1000))])
    with RawConnection(bootstrap, timeout=900) as conn:
        for first in range(0, partitions, _CHUNK):
            request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=60_000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=batch)
                    for p in range(first, min(first + _CHUNK, partitions))])])
            response = conn.request(ApiKey.PRODUCE, 7, request)
            for part in response.responses[0].partition_responses:  # type: ignore[attr-defined]
                if part.error_code:
                    raise RuntimeError(f"produce to partition {part.index}: {part.error_code}")


def _fetch_all(bootstrap: str, partitions: int) -> None:
    with RawConnection(bootstrap, timeout=900) as conn:
        for first in range(0, partitions, _CHUNK):
            request = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                    topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                        partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                        partition_max_bytes=1024) for p in range(first, min(first + _CHUNK, partitions))])],
                forgotten_topics_data=[], rack_id="")
            response = conn.request(ApiKey.FETCH, 11, request)
            for part in response.responses[0].partitions:  # type: ignore[attr-defined]
                if part.error_code or not part.records:
                    raise RuntimeError(f"fetch of partition {part.partition_index}: "
                                       f"error {part.error_code}, {len(part.records or b'')} bytes")


def run_once(kind: str, source: Path, partitions: int, nofile: int,
             create_only: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="partition-scale-") as tmp:
        server = Server(kind, source, Path(tmp), nofile)
        try:
            server.start()
            empty_startup_cpu = _cpu_s(server.pid)
            base_rss, base_fds = _rss_kb(server.pid), _fds(server.pid)
            cpu = _cpu_s(server.pid)
            result: dict[str, float] = {"create_s": _create(server.bootstrap, partitions)}
            result["empty_startup_cpu_s"] = empty_startup_cpu
            result["create_cpu_s"] = _cpu_s(server.pid) - cpu
            result["fds_created"] = _fds(server.pid)
            result["rss_per_partition_kb"] = (_rss_kb(server.pid) - base_rss) / partitions
            result["fds_base"] = base_fds
            if create_only:  # a restart of never-written partitions (loads N, syncs none)
                if kind != "tansu":
                    server.stop()
                    result["startup_s"] = server.start()
                    result["startup_cpu_s"] = _cpu_s(server.pid)
                    result["fds_started"] = _fds(server.pid)
                return result
            _produce_all(server.bootstrap, partitions)
            if kind != "tansu":  # (its memory engine answered our Fetch v11 with no topics)
                _fetch_all(server.bootstrap, partitions)
            result["fds_written"] = _fds(server.pid)
            if kind != "tansu":  # memory storage: a restart starts empty
                server.stop()
                result["startup_s"] = server.start()
                result["startup_cpu_s"] = _cpu_s(server.pid)
                result["fds_started"] = _fds(server.pid)
                _fetch_all(server.bootstrap, partitions)  # every record is still there
        finally:
            server.stop()
    return result


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    fmt = (lambda v: f"{v:.3f}") if max(values) < 100 else (lambda v: f"{v:.0f}")
    return f"{fmt(statistics.median(values))} [{fmt(min(values))}-{fmt(max(values))}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1000,10000,50000",
                        help="comma-separated partition counts (default 1000,10000,50000)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per count and server")
    parser.add_argument("--nofile", type=int, default=20000, help="ulimit -n of the servers")
    parser.add_argument("--peers", default="", help="'tansu' to measure Tansu's creation too")
    parser.add_argument("--source", type=Path, default=REPO_ROOT,
                        help="source tree the logserver runs from (a 'before' export)")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--create-only", action="store_true",
                        help="measure the creation and a restart of the never-written "
                             "partitions (no produce or read: a clean shutdown of N written "
                             "partitions fsyncs each of them)")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.partitions.split(",") if n]
    kinds = ["logserver", *[p for p in args.peers.split(",") if p]]
    raw: dict[str, dict[str, list[dict[str, float]]]] = {}
    for count in counts:
        for rnd in range(args.rounds):
            order = kinds if rnd % 2 == 0 else kinds[::-1]  # alternate who goes first
            for kind in order:
                try:
                    result = run_once(kind, args.source.resolve(), count, args.nofile,
                                      args.create_only)
                except (RuntimeError, OSError, IndexError) as exc:
                    result = {"error": 1.0}
                    print(f"{kind} {count}: {exc}", file=sys.stderr)
                raw.setdefault(kind, {}).setdefault(str(count), []).append(result)
                print(f"{kind} {count} round {rnd + 1}: {json.dumps(result)}", file=sys.stderr)
    keys = ["create_s", "create_cpu_s", "fds_created", "rss_per_partition_kb", "fds_written",
            "startup_s", "startup_cpu_s", "empty_startup_cpu_s", "fds_started"]
    print(f"ulimit -n {args.nofile}; median [min-max] of {args.rounds} rounds")
    print("| server | partitions | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for kind, by_count in raw.items():
        for count, results in by_count.items():
            cells = [_summary([r[k] for r in results if k in r]) for k in keys]
            failed = sum(1 for r in results if "error" in r)
            note = f" ({failed} failed)" if failed else ""
            print(f"| {kind}{note} | {count} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
