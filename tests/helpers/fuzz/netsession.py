"""One measured session: the healthy client on a running server, with or without the network
fuzzer beside it, the server's RSS sampled throughout. Shared by tests/integration/test_fuzz_network.py
(bounded) and benchmarks/fuzz_network.py (repeated, with and without the fuzzer).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from helpers.fuzz.healthy import HealthyResult, run_healthy
from helpers.fuzz.runner import TESTS, env


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class RssSampler(threading.Thread):
    """The peak resident size of ``pid``, sampled every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid = pid
        self.start_mb = rss_mb(pid)
        self.peak_mb = self.start_mb
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
            except OSError:
                return


@dataclass
class Session:
    healthy: HealthyResult
    fuzzer: dict[str, Any] | None
    start_rss_mb: float
    peak_rss_mb: float
    fuzzer_output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"healthy": self.healthy.to_json(), "fuzzer": self.fuzzer,
                "start_rss_mb": round(self.start_rss_mb, 1),
                "peak_rss_mb": round(self.peak_rss_mb, 1)}


def session(pid: int, port: int, topic: str, partitions: int, seconds: float, *,
            fuzz: bool, connections: int = 16, seed: int = 0,
            consumer_library: str = "confluent-kafka") -> Session:
    sampler = RssSampler(pid)
    sampler.start()
    proc = None
    if fuzz:
        proc = subprocess.Popen(
            [sys.executable, "-m", "helpers.fuzz.netfuzz", "--port", str(port), "--topic", topic,
             "--partitions", str(partitions), "--seconds", str(seconds),
             "--connections", str(connections), "--seed", str(seed)],
            cwd=TESTS, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        healthy = run_healthy(f"127.0.0.1:{port}", topic, partitions, seconds,
                              consumer_library=consumer_library)
        stats = None
        output = ""
        if proc is not None:
            out, err = proc.communicate(timeout=seconds + 120)
            output = err[-4000:]
            lines = out.strip().splitlines()
            stats = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()  # by its own pid: the Popen handle
            proc.wait()
        sampler.stop.set()
        sampler.join()
    return Session(healthy, stats, sampler.start_mb, sampler.peak_mb, output)


def wait_until(condition, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())
