"""kafka-python 3.0 consumer groups against a real logserver: three consumer processes
share a 6-partition topic, one is killed with SIGKILL and the others take over, a fourth
joins; committed offsets survive a server restart (clean and kill -9); the admin client
lists, describes and deletes groups and reads their offsets."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections import Counter

import pytest
from helpers.clienthelpers import create_topic, kp_producer
from helpers.waiting import wait_until

from commonlib.childproc import ChildProcess

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SESSION_TIMEOUT_MS = 3000
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}

# One consumer process: prints a JSON line per event; commits after each poll that
# returned records (at-least-once; exactly-once while no member dies mid-batch).
CONSUMER = r"""
import json, sys, time
from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener

bootstrap, topic, group, name, session_ms = sys.argv[1:6]

def out(**event):
    event.update(name=name, t=time.time())
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()

class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        out(event="revoked", partitions=sorted(tp.partition for tp in revoked))
    def on_partitions_assigned(self, assigned):
        out(event="assigned", partitions=sorted(tp.partition for tp in assigned))

consumer = KafkaConsumer(
    bootstrap_servers=bootstrap, group_id=group, client_id=name, enable_auto_commit=False,
    auto_offset_reset="earliest", session_timeout_ms=int(session_ms),
    heartbeat_interval_ms=int(session_ms) // 6, max_poll_interval_ms=60000,
    request_timeout_ms=20000)
consumer.subscribe([topic], listener=Listener())
while not consumer.partitions_for_topic(topic):  # see _knows_partitions
    time.sleep(0.1)
out(event="started")
while True:
    batch = consumer.poll(timeout_ms=200)
    records = [(tp.partition, m.offset, m.value.decode()) for tp, ms in batch.items() for m in ms]
    for p, o, v in records:
        out(event="rec", p=p, o=o, v=v)
    if records:
        try:
            consumer.commit()
        except Exception as exc:
            out(event="commit_failed", error=repr(exc))
"""


class ConsumerProcess:
    """A kafka-python consumer in its own process; events are collected by a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.name = name
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.child = ChildProcess(
            argv=[sys.executable, "-c", CONSUMER, bootstrap, topic, group, name,
                  str(SESSION_TIMEOUT_MS)],
            name=f"consumer {name}", capture_stdout=True).spawn()
        self.proc = self.child.proc
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self.lock:
                    self.events.append(event)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.events)

    def assignment(self) -> set[int]:
        """Partitions held now (eager protocol: a revoke drops all, an assign sets all)."""
        current: set[int] = set()
        for event in self.snapshot():
            if event["event"] == "assigned":
                current = set(event["partitions"])
            elif event["event"] == "revoked":
                current -= set(event["partitions"])
        return current

    def values(self) -> list[str]:
        return [e["v"] for e in self.snapshot() if e["event"] == "rec"]

    def kill9(self) -> None:
        self.child.kill9()

    def alive(self) -> bool:
        return self.child.running


def balanced(consumers: list[ConsumerProcess], partitions: int) -> bool:
    """Every partition held by exactly one live consumer, and every consumer holds some."""
    held = [c.assignment() for c in consumers]
    every = [p for h in held for p in h]
    return all(held) and sorted(every) == list(range(partitions))


def produce(bootstrap: str, topic: str, prefix: str, count: int, partitions: int) -> list[str]:
    producer = kp_producer(bootstrap)
    try:
        values = [f"{prefix}-{i}" for i in range(count)]
        for i, value in enumerate(values):
            producer.send(topic, value=value.encode(), partition=i % partitions)
        producer.flush(timeout=30)
        return values
    finally:
        producer.close(timeout=10)


def test_three_processes_kill_one_then_a_fourth_joins(server_factory, topic_name):
    srv = server_factory(settings=GROUP_SETTINGS)
    bootstrap = srv.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    group = f"g-{topic_name}"
    consumers: list[ConsumerProcess] = []
    try:
        consumers = [ConsumerProcess(bootstrap, topic_name, group, f"c{i}") for i in range(3)]
        wait_until(lambda: balanced(consumers, 6), timeout=60, what="3 consumers with 2 partitions each")
        assert sorted(len(c.assignment()) for c in consumers) == [2, 2, 2]

        # 1. every record consumed exactly once across the group
        first = produce(bootstrap, topic_name, "a", 600, 6)
        everything = lambda: [v for c in consumers for v in c.values()]  # noqa: E731
        wait_until(lambda: set(first) <= set(everything()), timeout=60, what="the first 600 records")
        counts = Counter(everything())
        assert [v for v in first if counts[v] != 1] == []
        for c in consumers:  # each read only its own partitions
            partitions = {e["p"] for e in c.snapshot() if e["event"] == "rec"}
            assert partitions == c.assignment(), (c.name, partitions)

        # 2. kill -9 one member: the others take over its partitions, nothing is lost
        victim = consumers[2]
        orphaned = victim.assignment()
        victim.kill9()
        killed_at = time.monotonic()
        second = produce(bootstrap, topic_name, "b", 600, 6)
        survivors = consumers[:2]
        wait_until(lambda: balanced(survivors, 6), timeout=30, what="the survivors to take over")
        takeover = time.monotonic() - killed_at
        assert takeover < SESSION_TIMEOUT_MS / 1000 + 5, takeover  # expiry + one rebalance
        taken = {p for c in survivors for p in c.assignment()}
        assert orphaned <= taken
        wait_until(lambda: set(second) <= set(v for c in survivors for v in c.values()), timeout=60, what="the second 600 records")
        counts = Counter(v for c in survivors for v in c.values())
        assert [v for v in second if counts[v] != 1] == []  # committed before the kill

        # 3. a fourth consumer joins: the partitions are spread again
        newcomer = ConsumerProcess(bootstrap, topic_name, group, "c3")
        consumers.append(newcomer)
        live = [*survivors, newcomer]
        wait_until(lambda: balanced(live, 6), timeout=60, what="a rebalance that includes the fourth consumer")
        assert sorted(len(c.assignment()) for c in live) == [2, 2, 2]
        third = produce(bootstrap, topic_name, "c", 300, 6)
        wait_until(lambda: set(third) <= set(v for c in live for v in c.values()), timeout=60, what="the last 300 records")
        counts = Counter(v for c in live for v in c.values())
        assert [v for v in third if counts[v] != 1] == []
        assert any(v.startswith("c-") for v in newcomer.values())
        assert not any(v.startswith("a-") for v in newcomer.values())  # committed: not re-read
    finally:
        for c in consumers:
            c.kill9()


def _knows_partitions(consumer, topic: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until kafka-python has the topic's partitions, before its first JoinGroup.

    kafka-python 3.0.12 forgets a rejoin that a poll() timed out on when the rejoin was
    its own (kafka/coordinator/base.py:480, see docs/testing.md): a leader that joined
    before it knew the partitions assigns nothing, rejoins for them, and if that
    completes between two polls it sends no heartbeat again and is dropped."""
    wait_until(lambda: consumer.partitions_for_topic(topic), timeout=30,
               what=f"kafka-python to see the partitions of {topic}")


def _consume(bootstrap: str, topic: str, group: str, count: int, timeout: float = 30) -> list:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        _knows_partitions(consumer, topic)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=300).values():
                got += [m.value.decode() for m in messages]
        if got:
            consumer.commit()
        # nothing more arrives after the expected count
        extra = consumer.poll(timeout_ms=500)
        got += [m.value.decode() for ms in extra.values() for m in ms]
        return got
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_committed_offsets_survive_server_restart(server_factory, topic_name, how):
    settings = dict(GROUP_SETTINGS)
    if how == "kill9":
        settings["log.flush.interval.messages"] = 1
    srv = server_factory(settings=settings)
    create_topic(srv.bootstrap, topic_name, partitions=2)
    group = f"g-{topic_name}"
    first = produce(srv.bootstrap, topic_name, "before", 100, 2)
    assert sorted(_consume(srv.bootstrap, topic_name, group, 100)) == sorted(first)
    srv.restart(clean=how == "clean")
    second = produce(srv.bootstrap, topic_name, "after", 50, 2)
    # a new consumer in the group resumes where the group committed
    assert sorted(_consume(srv.bootstrap, topic_name, group, 50)) == sorted(second)


def test_admin_client_groups(server_factory, topic_name):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    srv = server_factory(settings=GROUP_SETTINGS)
    create_topic(srv.bootstrap, topic_name, partitions=2)
    produce(srv.bootstrap, topic_name, "x", 20, 2)
    group = f"g-{topic_name}"
    consumer = KafkaConsumer(topic_name, bootstrap_servers=srv.bootstrap, group_id=group,
                             client_id="admin-test-consumer", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000)
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=15000)
    try:
        _knows_partitions(consumer, topic_name)
        got = 0
        deadline = time.monotonic() + 30
        while got < 20 and time.monotonic() < deadline:
            got += sum(len(ms) for ms in consumer.poll(timeout_ms=300).values())
        assert got == 20
        consumer.commit()

        groups = admin.list_groups()
        # ListGroups v5 (kafka-python 3.x) adds the group type: a classic group here
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable",
                "group_type": "classic"} in [{"group_type": "classic", **g} for g in groups]
        assert admin.list_groups(states_filter=["Empty"]) == []

        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] == "range"
        (member,) = described["members"]
        assert member["client_id"] == "admin-test-consumer"
        assert member["member_metadata"]["topics"] == [topic_name]
        assigned = member["member_assignment"]["assigned_partitions"]
        assert [(a["topic"], sorted(a["partitions"])) for a in assigned] == [(topic_name, [0, 1])]

        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp: om.offset for tp, om in offsets.items()} == {
            TopicPartition(topic_name, 0): 10, TopicPartition(topic_name, 1): 10}

        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}  # a member is in
        consumer.close(autocommit=False)
        deadline = time.monotonic() + 10
        while admin.describe_groups([group])[group]["group_state"] != "Empty":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert admin.delete_groups([group, "g-never-existed"]) == {
            group: "OK", "g-never-existed": "GroupIdNotFoundError"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        consumer.close(autocommit=False)
        admin.close()
