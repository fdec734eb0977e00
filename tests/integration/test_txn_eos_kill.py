"""Exactly-once consume-transform-produce survives its own kill -9, repeatedly: a
confluent-kafka worker (tests/helpers/eos_worker.py) is killed at random moments and
restarted with the same transactional.id; in the end the output topic holds each input
record's result exactly once (read_committed)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from test_txn_confluent import _consume_all, _create

WORKER = Path(__file__).parents[1] / "helpers" / "eos_worker.py"
KILLS = 5
PER_ROUND = 80  # new input before each worker start, so every worker has work to die in
INPUTS = PER_ROUND * (KILLS + 1)


def _wait_for_results(server, sink: str) -> list[bytes]:
    deadline = time.monotonic() + 90
    out: list[bytes] = []
    while time.monotonic() < deadline and len(out) < INPUTS:
        out = _consume_all(server, sink, "read_committed", expected=INPUTS)
    return out


def test_eos_loop_killed_repeatedly_outputs_each_input_once(server, topic_name):
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    _create(server, source, sink, partitions=2)
    plain = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    inputs = [str(i).encode() for i in range(INPUTS)]

    def feed(round_: int) -> None:
        for value in inputs[round_ * PER_ROUND:(round_ + 1) * PER_ROUND]:
            plain.produce(source, key=value, value=value)
        plain.flush(10)
    rng = random.Random(13)
    args = [sys.executable, str(WORKER), server.bootstrap, source, sink, f"g-{topic_name}",
            f"eos-{topic_name}"]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for round_ in range(KILLS):
            feed(round_)
            worker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(worker)
            time.sleep(rng.uniform(5.0, 9.0))  # a random point in its work: not a wait for a condition
            worker.kill()  # SIGKILL, mid-transaction or between transactions
            worker.wait(10)
        assert _consume_all(server, sink, "read_uncommitted", quiet_s=1.0), "no worker got to work"
        feed(KILLS)
        worker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(worker)
        out = _wait_for_results(server, sink)
        assert len(out) == INPUTS, f"only {len(out)} of {INPUTS} results"
        worker.kill()
        worker.wait(10)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert sorted(out) == sorted(b"out-" + v for v in inputs)
    # nothing more arrives later: no input was transformed twice
    everything = _consume_all(server, sink, "read_committed", quiet_s=2.0)
    assert len(everything) == INPUTS
    assert len(set(everything)) == INPUTS
