"""Longest event-loop stall of a real server while it does heavy storage work.

``python -m benchmarks.loop_stall --scenario compaction|create-topic [--runs 3]``

Measured from outside, so the server needs no probe of its own: one connection sends a
tiny request (ApiVersions v0) every ``--interval-ms`` and times each round trip; while
the loop is blocked nothing is answered, so the worst round trip is the longest stall
(plus one interval at most). Scenarios:

- ``compaction``: a compacted topic is filled with ``--size-mib`` of 1 KiB keyed records
  (``--keys`` distinct keys) by a server whose cleanup never runs, then a second server
  opens the same data with a 2 s cleanup interval and compacts it; the window runs
  from its start until it logged a finished pass and the log stopped changing.
- ``create-topic``: a ``--partitions``-partition topic is created while a producer sends
  1 MB batches to another topic; the window covers the CreateTopics call.
- ``idle``: the probe alone against an idle server, for 2 x ``--settle-s``: the floor
  the host's scheduling gives (other processes on the same cores).

Every run starts fresh servers in a temporary directory; the figure is the median of
``--runs`` runs with min and max beside it. ``--server-root`` runs another checkout's
server (e.g. the code before a change) against the same workload.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.kafka_raw import RawConnection
from benchmarks.targets import LogserverTarget
from kafkaproto import ApiKey, decode_response, encode_request
from kafkaproto.messages import ApiVersionsRequest, CreateTopicsRequest, ProduceRequest
from kafkaproto.records import build_batch

CLIENT_ID = "loop-stall"


class _Server(LogserverTarget):
    """logserver from ``root`` (default: this work tree) with the given settings."""

    def __init__(self, workdir: Path, data_dir: Path, settings: dict[str, object],
                 root: Path | None) -> None:
        flags = [part for name, value in settings.items() for part in (f"--{name}", str(value))]
        super().__init__(workdir, flags)
        self.data_dir = data_dir
        self.root = root

    def cwd(self) -> Path:
        return self.root or super().cwd()

    def env(self) -> dict[str, str]:
        env = super().env()
        if self.root is not None:
            env["PYTHONPATH"] = str(self.root)
        return env


def _bootstrap(server: LogserverTarget) -> str:
    assert server.bootstrap is not None, "started by the with block"
    return server.bootstrap


class Probe(threading.Thread):
    """ApiVersions round trips every ``interval`` seconds; keeps (send time, latency)."""

    def __init__(self, bootstrap: str, interval: float) -> None:
        super().__init__(name="loop-stall-probe", daemon=True)
        self.conn = RawConnection(bootstrap)
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop_event = threading.Event()
        self.frame = encode_request(ApiKey.API_VERSIONS, 0, 1, CLIENT_ID, ApiVersionsRequest())

    def run(self) -> None:
        sock = self.conn.sock
        while not self._stop_event.is_set():
            start = time.perf_counter()
            sock.sendall(self.frame)
            self.conn.receive_frame()
            self.samples.append((start, time.perf_counter() - start))
            time.sleep(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.conn.close()

    def worst_ms(self, since: float = 0.0, until: float = float("inf")) -> float:
        window = sorted(((lat, t) for t, lat in self.samples if since <= t <= until),
                        reverse=True)
        if window:
            print("  worst round trips (ms, at s into the window): "
                  + ", ".join(f"{lat * 1000:.1f} at {t - since:.1f}" for lat, t in window[:5]),
                  flush=True)
        return window[0][0] * 1000 if window else float("nan")


def _create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in configs.items()])], timeout_ms=600_000, validate_only=False)
    with RawConnection(bootstrap, timeout=600) as conn:
        response = conn.request(ApiKey.CREATE_TOPICS, 5, request)
    error = response.topics[0].error_code  # type: ignore[attr-defined]
    if error:
        raise RuntimeError(f"CreateTopics {name}: error {error}")


def _produce(bootstrap: str, topic: str, batches: Callable[[int], bytes], count: int,
             stop: threading.Event | None = None) -> int:
    """Send ``count`` batches (or until ``stop``), 4 in flight, acks=1; returns batches sent."""
    with RawConnection(bootstrap, timeout=120) as conn:
        sock = conn.sock
        pending = sent = 0
        while sent < count or pending:
            while pending < 4 and sent < count and not (stop and stop.is_set()):
                request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000,
                                         topic_data=[ProduceRequest.TopicProduceData(
                                             name=topic, partition_data=[
                                                 ProduceRequest.PartitionProduceData(
                                                     index=0, records=batches(sent))])])
                sock.sendall(encode_request(ApiKey.PRODUCE, 7, sent, CLIENT_ID, request))
                pending += 1
                sent += 1
            if not pending:
                break
            _, body = decode_response(ApiKey.PRODUCE, 7, conn.receive_frame())
            error = body.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined]
            if error:
                raise RuntimeError(f"produce to {topic}: error {error}")
            pending -= 1
    return sent


def _partition_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in data_dir.glob(f"{topic}-0/*.log"))


def run_compaction(workdir: Path, args: argparse.Namespace) -> float:
    data_dir = workdir / "data"
    topic = "compacted"
    per_batch = 1000
    batches = max(1, args.size_mib * 1024 // per_batch)
    value = b"v" * 1000

    def batch(i: int) -> bytes:
        first = i * per_batch
        return build_batch([(b"key-%08d" % ((first + j) % args.keys), value, [], 1_000)
                            for j in range(per_batch)])

    fill = _Server(workdir / "fill", data_dir, {
        "log.retention.check.interval.ms": 3_600_000, "log.segment.bytes": args.segment_mib << 20,
        "log.flush.interval.messages": 2**62}, args.server_root)
    (workdir / "fill").mkdir()
    with fill:
        bootstrap = _bootstrap(fill)
        _create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact",
                                            "delete.retention.ms": "86400000"})
        _produce(bootstrap, topic, batch, batches)
    before = _partition_bytes(data_dir, topic)
    (workdir / "clean").mkdir()
    clean = _Server(workdir / "clean", data_dir, {
        "log.retention.check.interval.ms": 2000, "log.segment.bytes": args.segment_mib << 20},
        args.server_root)
    with clean:
        bootstrap = _bootstrap(clean)
        probe = Probe(bootstrap, args.interval_ms / 1000)
        probe.start()
        time.sleep(1.0)  # warm-up: the first requests compile their codecs
        start = time.perf_counter()
        print(f"  window starts at {time.time():.3f}", flush=True)
        # Done: the server logged a finished pass, and the log then stayed the same size.
        while "compaction removed" not in clean.log_path.read_text(errors="replace"):
            if time.perf_counter() - start > args.time_cap_s:
                break
            time.sleep(0.2)
        size, still_since = _partition_bytes(data_dir, topic), time.monotonic()
        while time.monotonic() - still_since < args.settle_s:
            time.sleep(0.2)
            now_size = _partition_bytes(data_dir, topic)
            if now_size != size:
                size, still_since = now_size, time.monotonic()
            if time.perf_counter() - start > args.time_cap_s:
                break
        probe.stop()
    if args.keep_log:
        print(clean.log_path.read_text(errors="replace"))
    print(f"  compaction: {before / 2**20:.0f} MiB -> {size / 2**20:.0f} MiB, window "
          f"{time.perf_counter() - start:.1f} s; {len(probe.samples)} probes", flush=True)
    return probe.worst_ms(start)


def run_create_topic(workdir: Path, args: argparse.Namespace) -> float:
    data_dir = workdir / "data"
    load = build_batch([(None, b"x" * 1000, [], 1_000)] * 1000)
    server = _Server(workdir, data_dir, {"log.segment.bytes": 256 << 20}, args.server_root)
    with server:
        bootstrap = _bootstrap(server)
        _create_topic(bootstrap, "load", 1, {"retention.bytes": str(512 << 20)})
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(bootstrap, "load", lambda i: load,
                                                            10**9, stop), daemon=True)
        producer.start()
        probe = Probe(bootstrap, args.interval_ms / 1000)
        probe.start()
        time.sleep(1.0)  # warm-up: the first requests compile their codecs
        start = time.perf_counter()
        _create_topic(bootstrap, "wide", args.partitions, {})
        took = time.perf_counter() - start
        time.sleep(1.0)
        probe.stop()
        stop.set()
        producer.join()
    print(f"  create {args.partitions} partitions: {took:.1f} s; {len(probe.samples)} probes",
          flush=True)
    return probe.worst_ms(start)


def run_idle(workdir: Path, args: argparse.Namespace) -> float:
    """The floor: the same probe against an idle server (scheduling noise of the host)."""
    server = _Server(workdir, workdir / "data", {}, args.server_root)
    with server:
        probe = Probe(_bootstrap(server), args.interval_ms / 1000)
        probe.start()
        time.sleep(1.0)
        start = time.perf_counter()
        time.sleep(args.settle_s * 2)
        probe.stop()
    return probe.worst_ms(start)


SCENARIOS = {"compaction": run_compaction, "create-topic": run_create_topic, "idle": run_idle}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loop_stall",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interval-ms", type=float, default=5.0,
                        help="pause between probe requests (default 5)")
    parser.add_argument("--size-mib", type=int, default=1024,
                        help="compaction: MiB of records to compact (default 1024)")
    parser.add_argument("--segment-mib", type=int, default=64,
                        help="compaction: log.segment.bytes in MiB (default 64)")
    parser.add_argument("--keys", type=int, default=100_000,
                        help="compaction: distinct keys (default 100000)")
    parser.add_argument("--settle-s", type=float, default=5.0,
                        help="compaction: the log must not change this long to count as done")
    parser.add_argument("--time-cap-s", type=float, default=600.0)
    parser.add_argument("--partitions", type=int, default=2000,
                        help="create-topic: partitions of the new topic (default 2000)")
    parser.add_argument("--keep-log", action="store_true",
                        help="print the compacting server's log after each run")
    parser.add_argument("--server-root", type=Path,
                        help="run the server from this checkout instead of this work tree")
    args = parser.parse_args(argv)
    worst: list[float] = []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="loop-stall-") as tmp:
            print(f"run {run}/{args.runs} ({args.scenario})", flush=True)
            ms = SCENARIOS[args.scenario](Path(tmp), args)
            print(f"  longest stall: {ms:.1f} ms", flush=True)
            worst.append(ms)
    print(f"{args.scenario}: longest event-loop stall over {len(worst)} runs: "
          f"min {min(worst):.1f} / median {statistics.median(worst):.1f} / "
          f"max {max(worst):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
