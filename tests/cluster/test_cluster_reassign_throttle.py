"""Reassignment throttle (KIP-73) and the ``--generate`` planner of ``logserver topic
reassign``, on real processes: etcd, three logserver brokers, confluent-kafka for the
data, and the command itself. The pure parts (quota, throttled-replica lists, the
reassignment JSON, the planner) are checked first, without I/O.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from helpers.admin_cli import logserver, ok, ok_json, one_error_line
from helpers.cluster_clients import create
from helpers.clusterprocs import running_cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey
from kafkaproto.messages import IncrementalAlterConfigsRequest
from kafkaproto.messages.admin_alter import OP_DELETE, OP_SET
from logserver.admin_cli import reassign_plan
from logserver.admin_cli.errors import CliError
from logserver.cluster.model import BrokerInfo
from logserver.cluster.throttle import ReplicationQuota, listed
from logserver.topic_config import InvalidConfigError, validate_overrides

MIB = 1 << 20

# -- sans I/O -----------------------------------------------------------------------------------


def test_throttled_replica_lists_are_kafkas_format() -> None:
    assert listed("0:1,1:2", 1, 2) and listed("0:1, 1:2", 0, 1) and listed("*", 7, 3)
    assert not listed("0:1,1:2", 1, 1) and not listed("", 0, 1) and not listed(None, 0, 1)
    assert validate_overrides({"leader.replication.throttled.replicas": "0:1,1:2"}) == {
        "leader.replication.throttled.replicas": "0:1,1:2"}
    for bad in ("0-1", "a:1", "1,2", "0:"):
        with pytest.raises(InvalidConfigError):
            validate_overrides({"follower.replication.throttled.replicas": bad})


def test_the_quota_lets_through_no_more_than_the_rate_after_the_first_fetch() -> None:
    now = [0.0]
    quota = ReplicationQuota(lambda: now[0])
    rate = 1000
    assert quota.allowance(rate) == rate  # one second's worth, the first time
    quota.record(rate, rate)
    assert quota.exceeded(rate) and quota.allowance(rate) == 0
    now[0] = 0.5
    assert quota.exceeded(rate)
    now[0] = 1.0
    assert not quota.exceeded(rate)
    # Over 10 s of asking as often as allowed, the bytes passed stay within rate * t + rate.
    passed = rate
    for step in range(1, 1001):
        now[0] = 1.0 + step / 100
        allowed = quota.allowance(rate)
        if allowed:
            quota.record(allowed, rate)
            passed += allowed
        assert passed <= rate * now[0] + rate
    assert passed >= rate * 10  # and the rate is reached
    assert not ReplicationQuota().exceeded(2**63 - 1)  # Kafka's default: no throttle
    # Bytes counted under an old throttle are not owed under a new one.
    quota.record(10 * rate, rate)
    assert not quota.exceeded(2**63 - 1) and not quota.exceeded(rate)


def test_the_reassignment_json_round_trips_and_bad_files_are_refused() -> None:
    plan = {("a", 0): [1, 2], ("a", 1): [2, 3], ("b", 0): [3]}
    doc = reassign_plan.render(plan)
    assert doc["version"] == 1
    assert doc["partitions"][0] == {"topic": "a", "partition": 0, "replicas": [1, 2],
                                    "log_dirs": ["any", "any"]}
    assert reassign_plan.parse(json.dumps(doc)) == plan
    assert reassign_plan.parse('{"partitions": [{"topic": "a", "partition": 0, "replicas": [2]}]}') \
        == {("a", 0): [2]}
    for bad in ("not json", "{}", '{"version": 2, "partitions": []}', '{"partitions": []}',
                '{"partitions": [{"topic": "a", "partition": 0}]}',
                '{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}',
                '{"partitions": [{"topic": "a", "partition": 0, "replicas": [1], '
                '"log_dirs": ["/data"]}]}'):
        with pytest.raises(CliError):
            reassign_plan.parse(bad)


def test_the_planner_balances_leaders_and_replicas_and_spreads_racks() -> None:
    current = {("a", i): [1, 2] for i in range(3)} | {("b", i): [1, 2] for i in range(3)}
    brokers = [BrokerInfo(n, "h", 9000 + n, rack) for n, rack in
               ((1, "r1"), (2, "r1"), (3, "r2"), (4, "r2"))]
    plan = reassign_plan.propose(current, brokers)
    assert set(plan) == set(current)
    racks = {b.node_id: b.rack for b in brokers}
    for replicas in plan.values():
        assert len(replicas) == 2 and len({racks[r] for r in replicas}) == 2
    leaders = Counter(r[0] for r in plan.values())
    held = Counter(r for rs in plan.values() for r in rs)
    assert set(leaders) == {1, 2, 3, 4} and max(leaders.values()) - min(leaders.values()) <= 1
    assert max(held.values()) - min(held.values()) <= 1
    with pytest.raises(CliError):
        reassign_plan.propose({("a", 0): [1, 2, 3]}, brokers[:2])
    # A throttled move: the replicas there now send, the new ones receive.
    assert reassign_plan.throttled_replicas({("a", 0): [3, 1], ("a", 1): [1, 2]},
                                            {("a", 0): [1, 2], ("a", 1): [1, 2]}) == {
        "a": (["0:1", "0:2"], ["0:3"])}


# -- real brokers -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def three(tmp_path_factory):
    # A minute's session: the progress test pauses a broker across two CLI calls, and with
    # the helper's 3 s a loaded machine let its registration lapse ("unknown broker").
    with running_cluster(tmp_path_factory.mktemp("throttle"), 3,
                         **{"replica.lag.time.max.ms": 5000,
                            "broker.session.timeout.ms": 60000}) as cluster:
        yield cluster


def _copy_bytes(broker, topic: str) -> int:
    """Bytes of the partition's local log (0 while it has none)."""
    try:
        return sum(f.stat().st_size for f in broker.segment_files(topic, 0))
    except (AssertionError, OSError):
        return 0


def _moving(bootstrap: str) -> list:
    return ok_json("topic", "reassignments", "-b", bootstrap)


def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    described = ok_json("topic", "describe", topic, "-b", bootstrap)
    return {c["name"]: c["value"] for c in described["configs"] if c["source"] == "DYNAMIC_TOPIC_CONFIG"}


def _broker_rates(cluster) -> dict[str, str | None]:
    admin = cluster.admin()
    (future,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entries = future.result(timeout=20)
    return {name: entries[name].value for name in
            ("leader.replication.throttled.rate", "follower.replication.throttled.rate")}


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 65536, "enable.idempotence": True})
    failed: list[str] = []
    for i in range(count):
        producer.produce(topic, value=f"{i:08d}".encode().ljust(size, b"x"), partition=0,
                         on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed


def _consume_count(bootstrap: str, topic: str, expected: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    try:
        deadline = time.monotonic() + 60
        while seen < expected and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                seen += 1
    finally:
        consumer.close()
    return seen


def _copy_samples(cluster, topic: str, target: int, started: float,
                  samples: list[tuple[float, int]]) -> int:
    """Bytes of the target's copy now, appended to ``samples`` with the seconds since the
    move started (the clock read after the size: the copy had at most this long)."""
    copied = _copy_bytes(cluster.brokers[target], topic)
    samples.append((time.monotonic() - started, copied))
    return copied


@pytest.mark.slow
def test_a_throttled_move_copies_at_most_the_rate_and_its_throttle_goes_after(three) -> None:
    """The throttle is checked by state and bytes, not by how long the move takes (that is
    benchmarks/reassign_throttle.py's): at a rate that would take minutes, the copy grows
    yet stays within what the rate lets through and the move stays under way; raising the
    rate finishes it; --verify then removes the throttle."""
    cluster, b = three, three.bootstrap
    create(cluster, "slow", partitions=1, rf=1)
    source = cluster.partition("slow", 0).replicas[0]
    target = next(n for n in (1, 2, 3) if n != source)
    count = 3072
    _produce(b, "slow", count, 1024)
    size = _copy_bytes(cluster.brokers[source], "slow")
    assert size >= 3 * MIB
    # 16 KiB/s: over 3 minutes for the whole copy, far longer than any wait below, so
    # "still under way" is a state to check, not a race with a loaded machine
    rate = 16 * 1024

    started = time.monotonic()
    out = logserver("topic", "reassign", f"slow:0={target}", "--throttle", str(rate), "-b", b)
    assert out.returncode == 0, out.stderr
    assert "STARTED" in out.stdout and f"throttled to {rate} bytes/s" in out.stderr
    assert _topic_configs(b, "slow") == {
        "leader.replication.throttled.replicas": f"0:{source}",
        "follower.replication.throttled.replicas": f"0:{target}"}
    wait_until(lambda: _broker_rates(cluster) == dict.fromkeys(
        ("leader.replication.throttled.rate", "follower.replication.throttled.rate"), str(rate)),
        20, "the rates to reach broker 1")
    # The copy goes on under the throttle: part of it arrives.
    samples: list[tuple[float, int]] = []
    wait_until(lambda: _copy_samples(cluster, "slow", target, started, samples) > 0, 60,
               "the throttled copy to start")
    # Under way: listed, and --verify says so (exit 1) and leaves the throttle in place.
    listed_now = _moving(b)
    assert [(r["topic"], r["partition"], r["adding"]) for r in listed_now] == [("slow", 0, [target])]
    # progress in bytes: what the new replica holds of the leader's log (DescribeLogDirs)
    [moving] = listed_now
    assert moving["total_bytes"] >= size and 0 <= moving["moved_bytes"] < moving["total_bytes"]
    verifying = logserver("topic", "reassign", "--verify", f"slow:0={target}", "-b", b)
    assert verifying.returncode == 1 and "IN_PROGRESS" in verifying.stdout, verifying
    assert "follower.replication.throttled.replicas" in _topic_configs(b, "slow")
    assert 0 < _copy_samples(cluster, "slow", target, started, samples) < size, samples
    # The guarantee: past the first second's worth, no faster than the rate (a copy
    # fetched in a blink would break this from the first samples on; a slow machine only
    # makes the bound looser).
    for elapsed, copied in samples:
        assert copied <= rate * (elapsed + 1) + 65536, (elapsed, copied, samples)

    _set_rates(cluster, str(64 * MIB))  # the throttle lifted (not removed) mid-move
    wait_until(lambda: not _moving(b) and cluster.partition("slow", 0) is not None
               and cluster.partition("slow", 0).replicas == [target], 120,
               f"slow-0 moved to broker {target}")
    rows = ok_json("topic", "reassign", "--verify", f"slow:0={target}", "-b", b)
    assert [(r["status"], r["replicas"]) for r in rows] == [("COMPLETE", [target])]
    assert _topic_configs(b, "slow") == {}
    wait_until(lambda: set(_broker_rates(cluster).values()) == {str(2**63 - 1)}, 20,
               "the rates back to Kafka's default on broker 1")
    assert _consume_count(b, "slow", count) == count

    # Back with --wait: the command returns once the move is done, throttle removed.
    out = logserver("topic", "reassign", f"slow:0={source}", "--throttle", str(2 * MIB), "--wait",
                    "-b", b, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "COMPLETE" in out.stdout and "throttle removed" in out.stderr
    assert cluster.partition("slow", 0).replicas == [source]
    assert _topic_configs(b, "slow") == {}
    assert _consume_count(b, "slow", count) == count


@pytest.mark.slow
def test_generate_proposes_a_balanced_plan_that_execute_applies(three, tmp_path) -> None:
    cluster, b = three, three.bootstrap
    create(cluster, "plan-a", partitions=3, rf=1)
    create(cluster, "plan-b", partitions=3, rf=2)
    doc = ok_json("topic", "reassign", "--generate", "--topics", "plan-a,plan-b",
                  "--broker-list", "1,2,3", "-b", b)
    current = reassign_plan.parse(json.dumps(doc["current"]))
    for (topic, index), replicas in current.items():
        assert cluster.partition(topic, index).replicas == replicas
    proposed = reassign_plan.parse(json.dumps(doc["proposed"]))
    assert set(proposed) == set(current)
    assert all(len(proposed[w]) == len(current[w]) for w in current)
    leaders = Counter(r[0] for r in proposed.values())
    held = Counter(r for rs in proposed.values() for r in rs)
    assert sorted(leaders.values()) == [2, 2, 2] and sorted(held.values()) == [3, 3, 3]
    # The text form is Kafka's: two headed JSON documents.
    text = ok("topic", "reassign", "--generate", "--topics", "plan-a,plan-b",
              "--broker-list", "1,2,3", "-b", b)
    lines = text.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    assert json.loads(lines[4]) == doc["proposed"]

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(doc["proposed"]))
    rows = ok_json("topic", "reassign", "--execute", "--reassignment-json-file", str(plan_file),
                   "--wait", "-b", b, timeout=120)  # one document: the final state
    assert {(r["topic"], r["partition"]): r["status"] for r in rows} == dict.fromkeys(
        proposed, "COMPLETE")
    for (topic, index), replicas in proposed.items():
        wait_until(lambda t=topic, i=index, r=replicas: (p := cluster.partition(t, i)) is not None
                   and p.replicas == r and sorted(p.isrs) == sorted(r), 30,
                   f"{topic}-{index} on {replicas}")

    bad = logserver("topic", "reassign", "--generate", "--topics", "plan-a", "--broker-list",
                    "1,9", "-b", b)
    assert bad.returncode == 1 and "not in the cluster" in one_error_line(bad)
    usage = logserver("topic", "reassign", "--generate", "--topics", "plan-a", "-b", b)
    assert usage.returncode == 2 and "--broker-list" in one_error_line(usage)
    both = logserver("topic", "reassign", "plan-a:0=1", "--reassignment-json-file", str(plan_file),
                     "-b", b)
    assert both.returncode == 2


@pytest.mark.slow
def test_in_sync_replicas_are_never_throttled(tmp_path) -> None:
    """Kafka's rule: only replicas outside the ISR are throttled. With `*` on both lists
    and 1,000 bytes/s, 2 MiB of acks=all writes to an RF 3 topic (which needs both
    followers) still complete with the ISR whole: throttled, the followers would fall
    behind for over half an hour. (A long replica.lag.time.max.ms, so that a follower
    stalled by a busy machine stays in the ISR: once out, it would be throttled.)"""
    with running_cluster(tmp_path, 3, **{"replica.lag.time.max.ms": 60000,
                                         "min.insync.replicas": 3}) as cluster:
        _in_sync_unthrottled(cluster)


def _in_sync_unthrottled(cluster) -> None:
    b = cluster.bootstrap
    create(cluster, "steady", partitions=1, rf=3)
    ok("topic", "alter-config", "steady", "--set", "leader.replication.throttled.replicas=*",
       "--set", "follower.replication.throttled.replicas=*", "-b", b)
    _set_rates(cluster, "1000")
    wait_until(lambda: set(_broker_rates(cluster).values()) == {"1000"}, 20,
               "the rates on broker 1")
    _produce(b, "steady", 2048, 1024)  # acks=all with min.insync.replicas=3
    assert sorted(cluster.partition("steady", 0).isrs) == [1, 2, 3]


def _set_rates(cluster, value: str | None) -> None:
    """Both rates as the cluster-wide default (resource name ""), or deleted."""
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    client = BlockingClient(cluster.brokers[1].port)
    try:
        response = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(
            resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[
                    Config(name=name, config_operation=OP_DELETE if value is None else OP_SET,
                           value=value)
                    for name in ("leader.replication.throttled.rate",
                                 "follower.replication.throttled.rate")])],
            validate_only=False))
    finally:
        client.close()
    assert [r.error_code for r in response.responses] == [0], response


@pytest.mark.slow
def test_move_progress_grows_from_zero_to_total_then_the_entry_goes(three) -> None:
    """``topic reassignments``' progress, by state: 0 moved while the new replica cannot
    fetch (its broker paused), then never less than before and never more than the
    total (the leader's log, which does not grow meanwhile) while the throttled copy
    goes on, the move listed until the copy is whole; then the entry is gone and the
    new replica holds every byte."""
    cluster, b = three, three.bootstrap
    create(cluster, "progress", partitions=1, rf=1)
    source = cluster.partition("progress", 0).replicas[0]
    target = next(n for n in (1, 2, 3) if n != source)
    _produce(b, "progress", 1024, 1024)
    size = _copy_bytes(cluster.brokers[source], "progress")
    rate = 16 * 1024  # a minute for the copy: "under way" is a state, not a race
    cluster.pause(target)
    try:
        out = logserver("topic", "reassign", f"progress:0={target}", "--throttle", str(rate),
                        "-b", b)
        assert out.returncode == 0, out.stderr
        [first] = _moving(b)
    finally:
        cluster.resume(target)
    total = first["total_bytes"]
    assert first["moved_bytes"] == 0 and total >= size, first
    seen = [0]

    def progress() -> list:
        rows = _moving(b)
        for row in rows:
            assert row["total_bytes"] == total, (row, seen)
            assert seen[-1] <= row["moved_bytes"] <= total, (row, seen)
            seen.append(row["moved_bytes"])
        return rows
    # Part of the copy arrives while the throttle holds the rest back.
    wait_until(lambda: [r["moved_bytes"] for r in progress()] != [0], 60,
               "the throttled copy to start")
    assert 0 < seen[-1] < total, seen
    _set_rates(cluster, str(64 * MIB))  # lifted: the copy completes
    wait_until(lambda: progress() == [], 120, "the move to finish and leave the list")
    assert cluster.partition("progress", 0).replicas == [target]
    assert _copy_bytes(cluster.brokers[target], "progress") == size
    rows = ok_json("topic", "reassign", "--verify", f"progress:0={target}", "-b", b)
    assert [r["status"] for r in rows] == ["COMPLETE"]
    wait_until(lambda: set(_broker_rates(cluster).values()) == {str(2**63 - 1)}, 20,
               "the rates back to Kafka's default")
