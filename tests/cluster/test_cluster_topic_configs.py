"""Cluster-wide topic configs (etcd): AlterConfigs through one broker is what
DescribeConfigs on another shows, what every partition leader enforces, and what a
broker that was down at the time applies once it is back. 3 real brokers on one real
etcd, confluent-kafka's AdminClient and Producer.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import IncrementalAlterConfigsRequest
from kafkaproto.messages.admin_alter import OP_SET

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "configured"
SMALL = "300"  # max.message.bytes: a 1000-byte record is refused by the leader


def admin_of(cluster: Cluster, node: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap})


def described(admin: AdminClient, name: str) -> ConfigEntry:
    resource = ConfigResource(ResourceType.TOPIC, TOPIC)
    return admin.describe_configs([resource])[resource].result(30)[name]


def local_overrides(cluster: Cluster, node: int) -> dict[str, str]:
    """The overrides in broker ``node``'s own topic file (what its logs apply)."""
    data_dir = cluster.brokers[node].data_dir
    assert data_dir is not None
    for path in data_dir.rglob("__topics.json"):
        topics = json.loads(path.read_text())["topics"]
        if TOPIC in topics:
            return dict(topics[TOPIC]["configs"])
    return {}


def produce_refusals(cluster: Cluster) -> dict[int, int]:
    """A 1000-byte record to each partition: the error code each leader answered."""
    outcome: dict[int, int] = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 20000, "retries": 0})
    for partition in range(3):
        producer.produce(TOPIC, value=b"x" * 1000, partition=partition,
                         on_delivery=lambda err, msg: outcome.__setitem__(
                             msg.partition(), 0 if err is None else err.code()))
    assert producer.flush(30) == 0
    return outcome


def test_alter_configs_on_one_broker_holds_on_every_broker(cluster):
    creator = cluster.admin()  # kept alive until answered
    creator.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(timeout=30)
    wait_until(lambda: all((p := cluster.partition(TOPIC, i)) is not None and len(p.isrs) == 3
                           for i in range(3)), 30, "the topic's replicas in sync")
    cluster.brokers[3].stop()  # down while the configs change
    cluster.wait_for_brokers({1, 2})

    admin1 = admin_of(cluster, 1)
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", SMALL, incremental_operation=AlterConfigOpType.SET)])
    assert admin1.incremental_alter_configs([resource])[resource].result(30) is None

    # DescribeConfigs on another broker shows the change as a topic override.
    entry = described(admin_of(cluster, 2), "retention.ms")
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # Every partition leader enforces it (the Produce handler reads its local log's config).
    wait_until(lambda: produce_refusals(cluster) == {p: KafkaError.MSG_SIZE_TOO_LARGE
                                                     for p in range(3)},
               30, "each leader refusing a record over max.message.bytes")
    wait_until(lambda: local_overrides(cluster, 2).get("retention.ms") == "3600000", 30,
               "broker 2's log applying retention.ms")

    # Broker 3 was down: once back it applies the cluster's configs to its own log.
    assert local_overrides(cluster, 3).get("retention.ms") is None
    cluster.brokers[3].start()
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: local_overrides(cluster, 3) == {"retention.ms": "3600000",
                                                       "max.message.bytes": SMALL},
               30, "broker 3 applying the configs changed while it was down")
    entry = described(admin_of(cluster, 3), "max.message.bytes")
    assert entry.value == SMALL

    # A whole-set AlterConfigs through broker 3 drops max.message.bytes everywhere.
    admin3 = admin_of(cluster, 3)
    replace = ConfigResource(ResourceType.TOPIC, TOPIC, set_config={"retention.ms": "7200000"})
    assert admin3.alter_configs([replace])[replace].result(30) is None
    for node in (1, 2, 3):
        wait_until(lambda n=node: local_overrides(cluster, n) == {"retention.ms": "7200000"},
                   30, f"broker {node} applying the replaced configs")
    assert described(admin1, "max.message.bytes").source == ConfigSource.DEFAULT_CONFIG.value


def broker_setting(admin: AdminClient, node: int, name: str) -> ConfigEntry:
    resource = ConfigResource(ResourceType.BROKER, str(node))  # sent to that broker
    return admin.describe_configs([resource])[resource].result(30)[name]


def test_default_broker_configs_are_cluster_wide(cluster):
    cluster.brokers[3].stop()  # down while the default changes: it gets it from etcd
    cluster.wait_for_brokers({1, 2})
    # The cluster default (resource name ""), which confluent-kafka cannot name: raw wire.
    client = BlockingClient(cluster.brokers[1].port)
    try:
        Request = IncrementalAlterConfigsRequest
        response = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, Request(resources=[
            Request.AlterConfigsResource(resource_type=4, resource_name="", configs=[
                Request.AlterableConfig(name="log.retention.ms", config_operation=OP_SET,
                                        value="5400000")])]))
        assert [r.error_code for r in response.responses] == [ErrorCode.NONE]
    finally:
        client.close()
    cluster.brokers[3].start()
    cluster.wait_for_brokers({1, 2, 3})
    admin = cluster.admin()

    def everywhere() -> bool:
        return all((e := broker_setting(admin, node, "log.retention.ms")).value == "5400000"
                   and e.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
                   for node in (1, 2, 3))

    wait_until(everywhere, 30, "log.retention.ms as the cluster default on every broker")
    cluster.brokers[3].restart()  # and after a restart
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(everywhere, 30, "log.retention.ms as the cluster default after a restart")
    # A topic created afterwards inherits it, as DescribeConfigs on any broker shows.
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    wait_until(lambda: described(admin_of(cluster, 2), "retention.ms").value == "5400000", 30,
               "the topic inheriting the cluster default")


def test_a_change_etcd_cannot_take_is_answered_request_timed_out(cluster):
    creator = cluster.admin()  # kept alive until answered
    creator.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    wait_until(lambda: cluster.partition(TOPIC, 0) is not None, 30, "the topic in Metadata")
    cluster.etcd.stop()
    client = BlockingClient(cluster.brokers[2].port, timeout=60)
    try:
        Request = IncrementalAlterConfigsRequest
        response = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, Request(resources=[
            Request.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=[
                Request.AlterableConfig(name="retention.ms", config_operation=OP_SET,
                                        value="1000")])]))
        assert [(r.error_code, r.error_message.startswith("etcd failed"))
                for r in response.responses] == [(ErrorCode.REQUEST_TIMED_OUT, True)]
    finally:
        client.close()


def acks_all_error(cluster: Cluster, topic: str) -> int:
    """One acks=all record to partition 0 of ``topic``: the error code (0: acknowledged)."""
    outcome: list[int] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 20000, "retries": 0})
    producer.produce(topic, value=b"v", partition=0, on_delivery=lambda err, msg: outcome.append(
        0 if err is None else err.code()))
    assert producer.flush(30) == 0
    return outcome[0]


def test_topic_min_insync_replicas_overrides_the_brokers(cluster):
    """Kafka's rule: a topic's min.insync.replicas (3 here) overrides the brokers' (2)
    for acks=all; a topic without the override keeps the brokers' value."""
    strict, lenient = "strict", "lenient"
    admin = cluster.admin()
    created = admin.create_topics([NewTopic(strict, 1, 3, config={"min.insync.replicas": "3"}),
                                   NewTopic(lenient, 1, 3)])
    for future in created.values():
        future.result(timeout=30)
    wait_until(lambda: all((p := cluster.partition(t, 0)) is not None and len(p.isrs) == 3
                           for t in (strict, lenient)), 30, "the topics' replicas in sync")
    resource = ConfigResource(ResourceType.TOPIC, strict)
    admin2, admin3 = admin_of(cluster, 2), admin_of(cluster, 3)  # kept alive until answered
    entry = admin2.describe_configs([resource])[resource].result(30)["min.insync.replicas"]
    assert (entry.value, entry.source) == ("3", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    plain = ConfigResource(ResourceType.TOPIC, lenient)
    entry = admin2.describe_configs([plain])[plain].result(30)["min.insync.replicas"]
    assert (entry.value, entry.source) == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert acks_all_error(cluster, strict) == 0
    assert acks_all_error(cluster, lenient) == 0

    leaders = {cluster.partition(t, 0).leader for t in (strict, lenient)}
    follower = next(n for n in (1, 2, 3) if n not in leaders)
    cluster.brokers[follower].kill9()
    wait_until(lambda: all(follower not in cluster.partition(t, 0).isrs
                           for t in (strict, lenient)), 60, "the ISRs to shrink")
    assert acks_all_error(cluster, strict) == KafkaError.NOT_ENOUGH_REPLICAS
    assert acks_all_error(cluster, lenient) == 0  # 2 in sync = the brokers' value

    cluster.brokers[follower].start()
    wait_until(lambda: all(len(cluster.partition(t, 0).isrs) == 3 for t in (strict, lenient)),
               60, "the restarted follower back in the ISRs")
    assert acks_all_error(cluster, strict) == 0

    # IncrementalAlterConfigs on one broker: another describes it, acks=all holds (3 in sync).
    raised = ConfigResource(ResourceType.TOPIC, lenient, incremental_configs=[ConfigEntry(
        "min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
    assert admin2.incremental_alter_configs([raised])[raised].result(30) is None
    resource = ConfigResource(ResourceType.TOPIC, lenient)
    wait_until(lambda: admin3.describe_configs([resource])[resource].result(30)[
        "min.insync.replicas"].value == "3", 30, "the override seen on broker 3")
    assert acks_all_error(cluster, lenient) == 0
