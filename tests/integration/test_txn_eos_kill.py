"""Exactly-once consume-transform-produce survives its own kill -9, repeatedly: a
confluent-kafka worker (tests/helpers/eos_worker.py) is killed at random moments and
restarted with the same transactional.id; in the end the output topic holds each input
record's result exactly once (read_committed). Each worker is killed once it has written a
random number of records (mid-transaction or between transactions), not after a fixed
sleep: a worker starts, waits out its killed predecessor's session and gets to work in a
time no sleep can know on a loaded machine."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from helpers.txn_clients import consume_all, create_topics
from helpers.waiting import wait_until

WORKER = Path(__file__).parents[1] / "helpers" / "eos_worker.py"
KILLS = 5
PER_ROUND = 80  # new input before each worker start, so every worker has work to die in
INPUTS = PER_ROUND * (KILLS + 1)
# The worker's consumer session (tests/helpers/eos_worker.py): a killed worker's group
# membership ends after it, so the next worker's join waits that long. Kafka's floor
# (group.min.session.timeout.ms, 6 s) is lowered for this server.
SETTINGS = {"group.min.session.timeout.ms": 1000}


def _wait_for_results(server, sink: str) -> list[bytes]:
    deadline = time.monotonic() + 90
    out: list[bytes] = []
    while time.monotonic() < deadline and len(out) < INPUTS:
        out = consume_all(server, sink, "read_committed", expected=INPUTS)
    return out


def _written(watermarks: Consumer, sink: str) -> int:
    """The sink's high watermarks added up: records and transaction markers written so far,
    committed or not (a worker's output shows here before its transaction ends)."""
    return sum(watermarks.get_watermark_offsets(TopicPartition(sink, p), timeout=10)[1]
               for p in range(2))


def test_eos_loop_killed_repeatedly_outputs_each_input_once(server_factory, topic_name):
    server = server_factory(settings=SETTINGS)
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(server, source, sink, partitions=2)
    watermarks = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"w-{topic_name}"})
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
            # A random point in its work: some of this round's 80 inputs written (each
            # transaction takes at most 10, so the kill lands mid-work; 3 or more, as the
            # abort markers of its predecessor's open transaction count too).
            target = _written(watermarks, sink) + rng.randint(3, PER_ROUND // 2)
            wait_until(lambda t=target, w=worker: _written(watermarks, sink) >= t or w.poll() is not None,
                       90, f"worker {round_} to write its first records")
            assert worker.poll() is None, f"worker {round_} exited ({worker.returncode})"
            worker.kill()  # SIGKILL, mid-transaction or between transactions
            worker.wait(10)
        assert consume_all(server, sink, "read_uncommitted", quiet_s=1.0), "no worker got to work"
        feed(KILLS)
        worker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(worker)
        out = _wait_for_results(server, sink)
        assert len(out) == INPUTS, f"only {len(out)} of {INPUTS} results"
        worker.kill()
        worker.wait(10)
    finally:
        watermarks.close()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert sorted(out) == sorted(b"out-" + v for v in inputs)
    # nothing more arrives later: no input was transformed twice
    everything = consume_all(server, sink, "read_committed", quiet_s=2.0)
    assert len(everything) == INPUTS
    assert len(set(everything)) == INPUTS
