"""Consumers detect log truncation after a leader change (KIP-320), on three real brokers.

Partition 0 of the topic lives on brokers 1 and 2. Broker 2 is killed (-9), so broker 1
alone is the ISR and acknowledges records 5..9 that broker 2 never got; consumers read up
to offset 10. Then broker 1 is killed and broker 2, back, is elected uncleanly
(``unclean.leader.election.enable``): its log ends at 5, and two new records take offsets
5 and 6 under a new leader epoch. The consumers positioned at 10 ask the new leader,
with OffsetForLeaderEpoch, where their epoch ends there (5): the real Java consumer
without a reset policy raises LogTruncationException with divergent offset 5, the one
with ``auto.offset.reset=earliest`` goes on from 5 (reads the two new records, not the
log again from 0), and kafka-python raises LogTruncationError. Without the API both
only see OFFSET_OUT_OF_RANGE at 10. The raw answers are checked too, errors included.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from helpers.clusterprocs import running_cluster
from helpers.javaclient import start_java
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import ListOffsetsRequest, OffsetForLeaderEpochRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "truncated"


def _produce(bootstrap: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 30000, "enable.idempotence": False})
    failed: list[str] = []
    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=0,
                         on_delivery=lambda err, _m: err and failed.append(str(err)))
    assert producer.flush(60) == 0 and not failed, failed


def _leader_epoch(port: int) -> int:
    """The partition's leader epoch as its leader reports it (ListOffsets)."""
    client = BlockingClient(port)
    try:
        answer = client.call(ApiKey.LIST_OFFSETS, 4, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=TOPIC, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    finally:
        client.close()
    result = answer.topics[0].partitions[0]
    assert result.error_code == ErrorCode.NONE, result
    return int(result.leader_epoch)


def epoch_end(port: int, epoch: int, current: int = -1, version: int = 4) -> tuple[int, int, int]:
    """(error, leader epoch, end offset) of OffsetForLeaderEpoch for partition 0, as a
    consumer asks it (replica id -1)."""
    client = BlockingClient(port)
    try:
        answer = client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=TOPIC, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=current, leader_epoch=epoch)])]))
    finally:
        client.close()
    result = answer.topics[0].partitions[0]
    return int(result.error_code), int(result.leader_epoch), int(result.end_offset)


class Lines:
    """A child's stdout lines, read by a thread, waited for with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.seen = proc, []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, done, timeout: float, what: str) -> list[str]:
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            left = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"{what}: never came; output:\n" + "\n".join(self.seen[-60:]))
            self.seen.append(line)
        return self.seen


def test_consumers_detect_the_truncation_of_an_unclean_failover(tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import LogTruncationError

    with running_cluster(tmp_path, 3, **{"unclean.leader.election.enable": "true",
                                         "min.insync.replicas": 1}) as cluster:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2]])])[TOPIC].result(30)
        wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and p.leader == 1
                   and len(p.isrs) == 2, 30, "partition 0 led by broker 1, both in sync")
        _produce(cluster.bootstrap, [f"old-{i}" for i in range(5)])
        wait_until(lambda: b"old-4" in b"".join(
            f.read_bytes() for f in cluster.brokers[2].segment_files(TOPIC, 0)), 30,
            "broker 2 to have old-4")
        cluster.brokers[2].kill9()
        wait_until(lambda: cluster.partition(TOPIC, 0).isrs == [1], 30, "the ISR to be [1]")
        _produce(cluster.brokers[1].bootstrap, [f"old-{i}" for i in range(5, 10)])
        old_epoch = _leader_epoch(cluster.brokers[1].port)
        assert epoch_end(cluster.brokers[1].port, old_epoch) == (ErrorCode.NONE, old_epoch, 10)

        java = start_java("TruncationCheck", tmp_path / "classes", cluster.bootstrap, TOPIC,
                          "10", "2")
        kp = None
        try:
            lines = Lines(java)
            lines.until(lambda seen: sum(line.startswith("positioned ") for line in seen) == 2,
                        120, "the Java consumers positioned at 10")
            assert {"positioned none 10", "positioned earliest 10"} <= set(lines.seen), lines.seen
            kp = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="none",
                               enable_auto_commit=False, metadata_max_age_ms=1000,
                               reconnect_backoff_max_ms=1000)
            tp = TopicPartition(TOPIC, 0)
            kp.assign([tp])
            kp.seek(tp, 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < 10 and time.monotonic() < deadline:
                for records in kp.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
            assert got == [f"old-{i}".encode() for i in range(10)]

            # Broker 1 dies; broker 2, back with the log up to 5, leads uncleanly.
            cluster.brokers[1].kill9()
            cluster.brokers[2].start()
            wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and p.leader == 2,
                       60, "broker 2 to lead partition 0")
            _produce(cluster.brokers[2].bootstrap, ["new-5", "new-6"])
            port = cluster.brokers[2].port
            new_epoch = _leader_epoch(port)
            assert new_epoch > old_epoch
            # The consumers positioned at 10 detect the truncation.
            assert java.stdin is not None
            java.stdin.write("go\n")
            java.stdin.flush()
            lines.until(lambda seen: "done" in seen, 120, "the Java consumers after the failover")
            after = lines.seen[lines.seen.index("positioned earliest 10") + 1:]
            assert f"none truncation {TOPIC}-0 5" in after, after
            assert [line for line in after if line.startswith("earliest record ")] == [
                "earliest record 5 new-5", "earliest record 6 new-6"], after
            raised = None
            deadline = time.monotonic() + 60
            while raised is None and time.monotonic() < deadline:
                try:
                    polled = kp.poll(timeout_ms=200)
                except LogTruncationError as exc:
                    raised = exc
                else:
                    assert not polled, polled
            assert raised is not None, "kafka-python never raised LogTruncationError"
            assert raised.divergent_offsets[tp].offset == 5, raised.divergent_offsets
            # The leader's answers: the old epoch ends at 5 there, the current at its end.
            assert epoch_end(port, old_epoch) == (ErrorCode.NONE, old_epoch, 5)
            assert epoch_end(port, old_epoch, version=2) == (ErrorCode.NONE, old_epoch, 5)
            assert epoch_end(port, new_epoch, current=new_epoch) == (ErrorCode.NONE, new_epoch, 7)
            assert epoch_end(port, new_epoch + 1) == (ErrorCode.NONE, -1, -1)
            assert epoch_end(port, old_epoch, current=old_epoch)[0] == ErrorCode.FENCED_LEADER_EPOCH
            assert epoch_end(port, old_epoch, current=new_epoch + 1)[0] == \
                ErrorCode.UNKNOWN_LEADER_EPOCH
            assert epoch_end(cluster.brokers[3].port, old_epoch)[0] == \
                ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            if kp is not None:
                kp.close()
            java.kill()
            java.wait(10)
