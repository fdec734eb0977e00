"""Longest event-loop stall of the server while it creates a 2,000-partition topic under load.

Measured from outside: a probe process sends a tiny ApiVersions request every few
milliseconds on its own connection and times each round trip; a producer process keeps
appending small batches to another topic; then a CreateTopics of ``--partitions``
partitions is sent on a third connection. The figure is the worst probe round trip
between the CreateTopics request and a little after its response: while the loop is
blocked, every probe waits. For scale, the same is measured over an equally long window
right after the creation, with only the producer running ("steady"): on a shared machine
that is the noise floor. Each run starts a fresh server on a fresh data directory.

    python -m benchmarks.loop_stall_create [--runs 3] [--partitions 2000] [--source DIR]

``--source`` runs the server from another source tree (e.g. an export of an older
commit) to get a "before" figure with the same probe.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
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
from kafkaproto.messages import ApiVersionsRequest, CreateTopicsRequest, ProduceRequest
from kafkaproto.records import build_batch

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _start_server(source: Path, data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSERVER_")}
    env["PYTHONPATH"] = str(source)
    cmd = [sys.executable, "-m", "logserver", "--log.dirs", str(data_dir),
           "--listeners", f"PLAINTEXT://{HOST}:{port}", "--max.partitions", "1000000",
           "--log-level", "WARNING"]
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=source, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    _stop(proc)
    raise RuntimeError("server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _create_topic(bootstrap: str, name: str, partitions: int) -> float:
    """Seconds the CreateTopics request took; raises on an error answer."""
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=600_000, validate_only=False)
    with RawConnection(bootstrap, timeout=600) as conn:
        started = time.perf_counter()
        response = conn.request(ApiKey.CREATE_TOPICS, 5, request)
        elapsed = time.perf_counter() - started
    error = response.topics[0].error_code  # type: ignore[attr-defined]
    if error:
        raise RuntimeError(f"CreateTopics {name} failed with error {error}")
    return elapsed


def _probe(bootstrap: str, interval_s: float, stop: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """(wall-clock send time, round trip seconds) of every ApiVersions sent until stopped."""
    samples: list[tuple[float, float]] = []
    with RawConnection(bootstrap) as conn:
        body = ApiVersionsRequest()
        while not stop.is_set():
            sent = time.time()
            t0 = time.perf_counter()
            conn.request(ApiKey.API_VERSIONS, 0, body)
            samples.append((sent, time.perf_counter() - t0))
            time.sleep(interval_s)
    out.put(samples)


def _produce(bootstrap: str, topic: str, interval_s: float, stop: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Append a 10-record batch every ``interval_s`` (acks=1) until stopped; reports the count."""
    batch = build_batch([(None, os.urandom(100), [], int(time.time() * 1000))] * 10)
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    count = 0
    with RawConnection(bootstrap, timeout=600) as conn:
        while not stop.is_set():
            response = conn.request(ApiKey.PRODUCE, 7, request)
            if response.responses[0].partition_responses[0].error_code:  # type: ignore[attr-defined]
                raise RuntimeError("produce failed")
            count += 1
            time.sleep(interval_s)
    out.put(count)


def run_once(source: Path, partitions: int, probe_interval_s: float,
             produce_interval_s: float) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="loop-stall-create-") as tmp:
        port = _free_port()
        bootstrap = f"{HOST}:{port}"
        server = _start_server(source, Path(tmp) / "data", port, Path(tmp) / "server.log")
        workers: list[mp.process.BaseProcess] = []
        try:
            _create_topic(bootstrap, "load", 1)
            stop = ctx.Event()
            probe_out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            produce_out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            workers = [ctx.Process(target=_probe, args=(bootstrap, probe_interval_s, stop, probe_out)),
                       ctx.Process(target=_produce, args=(bootstrap, "load", produce_interval_s, stop,
                                                          produce_out))]
            for worker in workers:
                worker.start()
            time.sleep(2.0)  # the producer and the probe settle
            started = time.time()
            create_s = _create_topic(bootstrap, "wide", partitions)
            finished = time.time()
            steady_from = finished + 0.5
            steady_to = steady_from + max(1.0, min(create_s, 10.0))
            time.sleep(steady_to - time.time() + 0.1)
            stop.set()
            samples: list[tuple[float, float]] = probe_out.get(timeout=60)
            produced: int = produce_out.get(timeout=60)
            for worker in workers:
                worker.join(timeout=30)
        finally:
            for worker in workers:
                if worker.is_alive() and worker.pid is not None:
                    os.kill(worker.pid, signal.SIGKILL)
                    worker.join()
            _stop(server)
    during = [rtt for sent, rtt in samples if started - 0.05 <= sent <= finished + 0.5]
    steady = [rtt for sent, rtt in samples if steady_from <= sent <= steady_to]
    if not during:
        raise RuntimeError("no probe sample during the creation")
    return {"stall_ms": max(during) * 1000, "steady_ms": max(steady, default=0.0) * 1000,
            "create_s": create_s, "probes": float(len(during)), "produced": float(produced)}


def _summary(values: list[float]) -> str:
    return f"min {min(values):.1f}  median {statistics.median(values):.1f}  max {max(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--probe-interval-ms", type=float, default=2.0)
    parser.add_argument("--produce-interval-ms", type=float, default=2.0)
    parser.add_argument("--source", type=Path, default=REPO_ROOT,
                        help="source tree to run the server from (default: this one)")
    args = parser.parse_args(argv)
    results = []
    for run in range(1, args.runs + 1):
        result = run_once(args.source.resolve(), args.partitions, args.probe_interval_ms / 1000,
                          args.produce_interval_ms / 1000)
        results.append(result)
        print(f"run {run}: longest stall {result['stall_ms']:.1f} ms during a {result['create_s']:.2f} s "
              f"CreateTopics of {args.partitions} partitions ({int(result['probes'])} probes; "
              f"steady worst {result['steady_ms']:.1f} ms; {int(result['produced'])} produce requests)",
              flush=True)
    print(f"longest event-loop stall (ms) over {args.runs} runs: "
          f"{_summary([r['stall_ms'] for r in results])}")
    print(f"longest probe round trip in the steady window after (ms): "
          f"{_summary([r['steady_ms'] for r in results])}")
    print(f"CreateTopics duration (s): {_summary([r['create_s'] for r in results])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
