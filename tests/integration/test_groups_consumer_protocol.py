"""The KIP-848 consumer group protocol with real clients: confluent-kafka consumers with
``group.protocol=consumer`` against a real logserver. Two consumers (one of them a child
process) share a 4-partition topic, read every record exactly once while committing,
and when the child is killed with SIGKILL the other takes over every partition after
the broker-side session timeout. Also ConsumerGroupDescribe and ListGroups v5 through
the confluent-kafka admin client, and the group surviving a server restart."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import rawwire as rw
from helpers.clienthelpers import create_topic, kp_admin
from helpers.serverproc import ServerProcess

from kafkaproto.frames import decode_response, encode_request
from kafkaproto.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

pytestmark = pytest.mark.timeout(180)

WORKER = Path(__file__).parents[1] / "helpers" / "cgp_consumer.py"
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.session.timeout.ms": 3000,
}
PARTITIONS = 4


@pytest.fixture
def srv(request, tmp_path) -> ServerProcess:
    server = ServerProcess(tmp_path / "data", settings=SETTINGS)
    request.addfinalizer(server.stop)
    server.start()
    return server


def consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


class Child:
    """The child consumer's stdout, read line by line on a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), bootstrap, topic, group],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.assigned: set[int] = set()
        self.values: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            kind, _, rest = line.partition(" ")
            if kind == "ASSIGN":
                self.assigned = {int(p) for p in rest.split(",") if p}
            elif kind == "MSG":
                self.values.append(rest)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # SIGKILL: no leave, no last heartbeat
        self.process.wait(10)


def poll_into(c, out: list[str], seconds: float) -> None:
    """Poll ``c`` for about ``seconds``, committing each record before keeping it."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        message = c.poll(0.1)
        if message is None or message.error():
            continue
        c.commit(message=message, asynchronous=False)
        out.append(message.value().decode())


def describe_raw(port: int, group: str) -> ConsumerGroupDescribeResponse.DescribedGroup:
    """ConsumerGroupDescribe v1 on the wire: the epochs the admin client does not show."""
    request = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
    with rw.Conn(port) as conn:
        reply = conn.call(bytes(encode_request(69, 1, 31, "test", request)))
    assert reply is not None
    frame = reply[1]
    _, response = decode_response(69, 1, (31).to_bytes(4, "big") + frame)
    [described] = response.groups
    return described


def assigned(c) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_consumers_share_partitions_and_one_takes_over_from_a_killed_one(srv, topic_name):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    create_topic(srv.bootstrap, topic_name, partitions=PARTITIONS)
    group = f"g-{topic_name}"
    mine = consumer(srv.bootstrap, group)
    mine.subscribe([topic_name])
    child = Child(srv.bootstrap, topic_name, group)
    got: list[str] = []
    try:
        # 1. both members get a disjoint, non-empty share covering every partition
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            poll_into(mine, got, 0.3)
            child.drain()
            if (assigned(mine) and child.assigned and not assigned(mine) & child.assigned
                    and assigned(mine) | child.assigned == set(range(PARTITIONS))):
                break
        share = assigned(mine)
        assert share and child.assigned and not share & child.assigned, (share, child.assigned)
        assert share | child.assigned == set(range(PARTITIONS))

        # the broker's view: ConsumerGroupDescribe through the admin client
        admin = AdminClient({"bootstrap.servers": srv.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        assert len(described.members) == 2
        by_member = [{tp.partition for tp in m.assignment.topic_partitions}
                     for m in described.members]
        assert sorted(map(sorted, by_member)) == sorted([sorted(share), sorted(child.assigned)])
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert group in {g.group_id for g in listed.valid}
        # ... and through DescribeGroups (kafka-python), as a classic consumer group would be
        kp = kp_admin(srv.bootstrap)
        try:
            info = kp.describe_groups([group])[group]
        finally:
            kp.close()
        assert (info["group_state"], info["protocol_type"], info["protocol_data"]) == \
            ("Stable", "consumer", "uniform")
        shares = [sorted(p for a in m["member_assignment"]["assigned_partitions"]
                         for p in a["partitions"]) for m in info["members"]]
        assert sorted(shares) == sorted([sorted(share), sorted(child.assigned)])
        assert all(m["member_metadata"]["topics"] == [topic_name] for m in info["members"])

        # 2. together they read every record exactly once
        first = [f"a{i}" for i in range(200)]
        produce(srv.bootstrap, topic_name, first)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) + len(child.values) < len(first):
            poll_into(mine, got, 0.3)
            child.drain()
        poll_into(mine, got, 1.0)  # anything read twice would show up by now
        child.drain()
        assert got and child.values, "one consumer read nothing"
        assert sorted(got + child.values) == sorted(first)
        mine_set = set(got)
        assert all(int(v[1:]) % PARTITIONS in share for v in mine_set)

        # 3. kill -9 the child: after the session timeout the survivor has everything
        child.kill()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and assigned(mine) != set(range(PARTITIONS)):
            poll_into(mine, got, 0.3)
        assert assigned(mine) == set(range(PARTITIONS))
        second = [f"b{i}" for i in range(100)]
        produce(srv.bootstrap, topic_name, second)
        before = len(got)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) - before < len(second):
            poll_into(mine, got, 0.3)
        poll_into(mine, got, 1.0)
        assert sorted(got[before:]) == sorted(second)
        assert sorted(got + child.values) == sorted(first + second)  # nothing twice
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert len(described.members) == 1
    finally:
        child.kill()
        mine.close()


@pytest.mark.parametrize("how", ["stop", "kill9"])
def test_new_partitions_reassign_and_the_group_survives_a_server_restart(tmp_path, topic_name,
                                                                         how):
    """Partitions added to a subscribed topic bump the group epoch and are assigned; the
    group's epochs and assignment are persisted in __consumer_offsets, so after a restart
    (clean, or after SIGKILL) the member goes on with its epoch (a group rebuilt from
    nothing would be at epoch 1)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    # Nothing here waits for a session to expire, and the member must outlive the restart:
    # with SETTINGS' 3 s session, a restart slowed by a loaded machine plus librdkafka's
    # reconnect backoff fenced it (UNKNOWN_MEMBER_ID on the next commit), as Kafka would.
    server = ServerProcess(tmp_path / "data",
                           settings={**SETTINGS, "group.consumer.session.timeout.ms": 30000})
    try:
        server.start()
        create_topic(server.bootstrap, topic_name, partitions=2)
        group = f"g-{topic_name}"
        c = consumer(server.bootstrap, group)
        c.subscribe([topic_name])
        got: list[str] = []
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and assigned(c) != {0, 1}:
                poll_into(c, got, 0.3)
            assert assigned(c) == {0, 1}
            assert describe_raw(server.port, group).group_epoch == 1
            admin = AdminClient({"bootstrap.servers": server.bootstrap})
            admin.create_partitions([NewPartitions(topic_name, PARTITIONS)])[topic_name].result(30)
            while time.monotonic() < deadline and assigned(c) != set(range(PARTITIONS)):
                poll_into(c, got, 0.3)
            assert assigned(c) == set(range(PARTITIONS))
            produce(server.bootstrap, topic_name, [f"x{i}" for i in range(20)])
            while time.monotonic() < deadline and len(got) < 20:
                poll_into(c, got, 0.3)
            before = describe_raw(server.port, group)
            assert before.group_epoch == 2 and before.group_state == "Stable"
            [member] = before.members
            assert member.member_epoch == 2
            if how == "stop":
                server.stop()
            else:
                server.kill9()
            server.start()  # same port, same data
            after = describe_raw(server.port, group)
            assert after.group_epoch >= 2
            assert [(m.member_id, m.member_epoch >= 2) for m in after.members] == \
                [(member.member_id, True)]
            assert {p for tp in after.members[0].assignment.topic_partitions
                    for p in tp.partitions} == set(range(PARTITIONS))
            produce(server.bootstrap, topic_name, [f"y{i}" for i in range(20)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(got) < 40:
                poll_into(c, got, 0.3)
            assert sorted(got) == sorted([f"x{i}" for i in range(20)] + [f"y{i}" for i in range(20)])
            final = describe_raw(server.port, group)
            assert [m.member_id for m in final.members] == [member.member_id]
            assert final.group_epoch >= 2
        finally:
            c.close()
    finally:
        server.stop()


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(srv, topic_name):
    """A static member (group.instance.id) that closes leaves with epoch -2; a new
    consumer under the same instance id takes its place and partitions back while the
    group epoch stays where it was."""
    from confluent_kafka import Consumer

    create_topic(srv.bootstrap, topic_name, partitions=PARTITIONS)
    group = f"g-{topic_name}"

    def static_consumer():
        c = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": group,
                      "group.protocol": "consumer", "group.instance.id": "instance-1",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic_name])
        return c

    got: list[str] = []
    first = static_consumer()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and assigned(first) != set(range(PARTITIONS)):
            poll_into(first, got, 0.3)
        assert assigned(first) == set(range(PARTITIONS))
        before = describe_raw(srv.port, group)
        [old] = before.members
        assert old.instance_id == "instance-1"
    finally:
        first.close()
    left = describe_raw(srv.port, group)
    assert [(m.member_id, m.member_epoch) for m in left.members] == [(old.member_id, -2)]
    second = static_consumer()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and assigned(second) != set(range(PARTITIONS)):
            poll_into(second, got, 0.3)
        assert assigned(second) == set(range(PARTITIONS))
        after = describe_raw(srv.port, group)
        [new] = after.members
        assert new.instance_id == "instance-1"
        assert after.group_epoch == before.group_epoch  # no rebalance
        produce(srv.bootstrap, topic_name, [f"s{i}" for i in range(8)])
        while time.monotonic() < deadline and len(got) < 8:
            poll_into(second, got, 0.3)
        assert sorted(got) == sorted(f"s{i}" for i in range(8))
    finally:
        second.close()


def test_regex_subscription_picks_up_topics_created_later(srv, topic_name):
    """librdkafka sends a ``^``-prefixed subscription as SubscribedTopicRegex (v1): the
    broker resolves it, and a matching topic created later joins the assignment."""
    create_topic(srv.bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(srv.bootstrap, f"other-{topic_name}", partitions=2)
    c = consumer(srv.bootstrap, f"g-{topic_name}")
    c.subscribe([f"^{topic_name}-.*"])
    got: list[str] = []

    def topics() -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in c.assignment()}

    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not topics():
            poll_into(c, got, 0.3)
        assert topics() == {(f"{topic_name}-a", 0), (f"{topic_name}-a", 1)}
        create_topic(srv.bootstrap, f"{topic_name}-b", partitions=1)
        want = {(f"{topic_name}-a", 0), (f"{topic_name}-a", 1), (f"{topic_name}-b", 0)}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and topics() != want:
            poll_into(c, got, 0.3)
        assert topics() == want
        group = describe_raw(srv.port, f"g-{topic_name}")
        # librdkafka joins its regexes into one: (^a)|(^b)
        assert group.members[0].subscribed_topic_regex == f"(^{topic_name}-.*)"
    finally:
        c.close()


def test_transactional_offsets_of_a_consumer_protocol_member(srv, topic_name):
    """consume-transform-produce with send_offsets_to_transaction: TxnOffsetCommit carries
    the member epoch as its generation, and the offsets are visible once committed."""
    from confluent_kafka import Producer, TopicPartition

    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(srv.bootstrap, source, partitions=2)
    create_topic(srv.bootstrap, sink, partitions=2)
    produce_values = [f"v{i}" for i in range(20)]
    plain = Producer({"bootstrap.servers": srv.bootstrap})
    for i, value in enumerate(produce_values):
        plain.produce(source, value=value.encode(), partition=i % 2)
    assert plain.flush(30) == 0
    c = consumer(srv.bootstrap, f"g-{topic_name}")
    c.subscribe([source])
    txn = Producer({"bootstrap.servers": srv.bootstrap, "transactional.id": f"tx-{topic_name}"})
    txn.init_transactions(30)
    done = 0
    try:
        deadline = time.monotonic() + 60
        while done < len(produce_values) and time.monotonic() < deadline:
            messages = [m for m in c.consume(10, 0.3) if not m.error()]
            if not messages:
                continue
            txn.begin_transaction()
            for m in messages:
                txn.produce(sink, value=b"out-" + m.value(), partition=m.partition())
            offsets = {(m.topic(), m.partition()): m.offset() + 1 for m in messages}
            txn.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                c.consumer_group_metadata(), 30)
            txn.commit_transaction(30)
            done += len(messages)
        assert done == len(produce_values)
        committed = c.committed([TopicPartition(source, 0), TopicPartition(source, 1)], 30)
        assert [tp.offset for tp in committed] == [10, 10]
    finally:
        c.close()


def test_a_members_first_commit_is_logged_as_a_consumer_protocol_commit(srv, topic_name):
    """The first commit of a consumer-protocol group creates the entry that holds its
    offsets; the server's log says a member of that group committed (with its id and
    epoch), not that someone committed outside group management (issue 26 item 6)."""
    create_topic(srv.bootstrap, topic_name, partitions=PARTITIONS)
    produce(srv.bootstrap, topic_name, [f"v{i}" for i in range(PARTITIONS)])
    group = f"{topic_name}-logged"
    c = consumer(srv.bootstrap, group)
    try:
        c.subscribe([topic_name])
        got: list[str] = []
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            poll_into(c, got, 0.5)
        assert got, "the member read nothing"
        member = c.memberid()
    finally:
        c.close()
    line = next((line for line in srv.output_tail(200_000).splitlines()
                 if f"logserver.groups.membership: group {group}: " in line), None)
    assert line is not None, srv.output_tail(4000)
    assert "outside group management" not in line, line
    assert f"offset commit by member {member} (epoch " in line, line
    assert "consumer-protocol group" in line, line
