"""CreatePartitions, DeleteRecords, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs
through real admin clients (confluent-kafka, kafka-python, aiokafka) against a real server."""

from __future__ import annotations

import pytest
from helpers.clienthelpers import aio_run, ck_produce, ck_read, kp_admin
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def ck_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})


def ck_create(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None):
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)  # referenced until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def ck_error(future) -> int:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as caught:
        future.result(15)
    return caught.value.args[0].code()


def partition_count(bootstrap: str, name: str) -> int:
    metadata = ck_admin(bootstrap).list_topics(name, timeout=15)
    return len(metadata.topics[name].partitions)


def watermarks(bootstrap: str, name: str, partition: int) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=15)
        return int(low), int(high)
    finally:
        consumer.close()


def topic_configs(bootstrap: str, name: str):
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = ck_admin(bootstrap)
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    return next(iter(futures.values())).result(15)


# -- CreatePartitions -------------------------------------------------------------------------


def test_create_partitions_confluent(module_server, topic_name):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions

    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 2)
    before = ck_produce(bootstrap, topic_name, [{"value": b"p%d" % p, "partition": p} for p in (0, 1)])
    admin = ck_admin(bootstrap)
    admin.create_partitions([NewPartitions(topic_name, 4)], validate_only=True)[topic_name].result(15)
    assert partition_count(bootstrap, topic_name) == 2  # validate_only changes nothing
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(15)
    assert partition_count(bootstrap, topic_name) == 4
    assert ck_error(admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name]) == \
        KafkaError.INVALID_PARTITIONS
    assert ck_error(admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name]) == \
        KafkaError.INVALID_PARTITIONS
    assert ck_error(admin.create_partitions([NewPartitions(topic_name + "-none", 5)])[
        topic_name + "-none"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    after = ck_produce(bootstrap, topic_name, [{"value": b"new", "partition": 3}])
    assert after[0].partition == 3 and after[0].offset == 0
    got = ck_read(bootstrap, topic_name, [0, 1, 3], end={0: 1, 1: 1, 3: 1})
    assert sorted((r.partition, r.offset, r.value) for r in got) == \
        [(0, 0, b"p0"), (1, 0, b"p1"), (3, 0, b"new")]
    assert [(r.partition, r.offset) for r in before] == [(0, 0), (1, 0)]


def test_create_partitions_kafka_python_and_aiokafka(module_server, topic_name):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError

    bootstrap = module_server.bootstrap
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        admin.create_partitions({topic_name: NewPartitions(3)})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic_name: NewPartitions(2)})
    finally:
        admin.close()
    assert partition_count(bootstrap, topic_name) == 3

    async def grow() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            await client.create_partitions({topic_name: AioNewPartitions(5)})
        finally:
            await client.close()

    aio_run(grow())
    assert partition_count(bootstrap, topic_name) == 5


# -- DeleteRecords ----------------------------------------------------------------------------


def test_delete_records_confluent_and_consumer_reset(module_server, topic_name):
    from confluent_kafka import KafkaError, TopicPartition

    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 2)
    ck_produce(bootstrap, topic_name, [{"value": b"v%d" % i, "partition": 0} for i in range(10)])
    admin = ck_admin(bootstrap)
    done = admin.delete_records([TopicPartition(topic_name, 0, 4)])
    assert next(iter(done.values())).result(15).low_watermark == 4
    assert watermarks(bootstrap, topic_name, 0) == (4, 10)
    beyond = admin.delete_records([TopicPartition(topic_name, 0, 11)])
    assert ck_error(next(iter(beyond.values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    # A consumer at offset 1 (now below the log start) resets per auto.offset.reset.
    got = ck_read(bootstrap, topic_name, [0], start={0: 1}, end={0: 10})
    assert [r.offset for r in got] == list(range(4, 10))
    assert got[0].value == b"v4"
    # -1: everything up to the high watermark.
    done = admin.delete_records([TopicPartition(topic_name, 0, -1)])
    assert next(iter(done.values())).result(15).low_watermark == 10
    assert watermarks(bootstrap, topic_name, 0) == (10, 10)
    assert watermarks(bootstrap, topic_name, 1) == (0, 0)


def test_delete_records_kafka_python_and_aiokafka(module_server, topic_name):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import OffsetOutOfRangeError

    bootstrap = module_server.bootstrap
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        ck_produce(bootstrap, topic_name, [{"value": b"v%d" % i, "partition": 0} for i in range(6)])
        result = admin.delete_records({TopicPartition(topic_name, 0): 2})
        assert result[TopicPartition(topic_name, 0)]["low_watermark"] == 2
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({TopicPartition(topic_name, 0): 7})
    finally:
        admin.close()

    async def delete() -> dict:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            return await client.delete_records({AioTopicPartition(topic_name, 0): RecordsToDelete(5)})
        finally:
            await client.close()

    result = aio_run(delete())
    assert result[AioTopicPartition(topic_name, 0)] == 5
    assert watermarks(bootstrap, topic_name, 0) == (5, 6)


# -- configs ----------------------------------------------------------------------------------


def test_incremental_alter_configs_confluent(module_server, topic_name):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 1, {"retention.ms": "86400000"})
    admin = ck_admin(bootstrap)

    def alter(*entries, validate_only=False):
        resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=list(entries))
        return next(iter(admin.incremental_alter_configs([resource],
                                                         validate_only=validate_only).values()))

    def entry(name, value, op=AlterConfigOpType.SET):
        return ConfigEntry(name, value, incremental_operation=op)

    alter(entry("retention.ms", "1000"), validate_only=True).result(15)
    assert topic_configs(bootstrap, topic_name)["retention.ms"].value == "86400000"
    alter(entry("retention.ms", "1000"), entry("max.message.bytes", "2000"),
          entry("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(15)
    configs = topic_configs(bootstrap, topic_name)
    assert configs["retention.ms"].value == "1000"
    assert configs["max.message.bytes"].value == "2000"
    assert set(configs["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert not configs["retention.ms"].is_read_only
    alter(entry("retention.ms", None, AlterConfigOpType.DELETE),
          entry("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)).result(15)
    configs = topic_configs(bootstrap, topic_name)
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].source == 5
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].value == "2000"
    assert ck_error(alter(entry("retention.ms", "soon"))) == KafkaError.INVALID_CONFIG
    assert ck_error(alter(entry("retention.ms", "5", AlterConfigOpType.APPEND))) == \
        KafkaError.INVALID_CONFIG
    assert ck_error(alter(entry("no.such.config", "1"))) == KafkaError.INVALID_CONFIG
    missing = ConfigResource(ResourceType.TOPIC, topic_name + "-none",
                             incremental_configs=[entry("retention.ms", "1")])
    assert ck_error(next(iter(admin.incremental_alter_configs([missing]).values()))) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_all_overrides(module_server, topic_name):
    from confluent_kafka.admin import ConfigResource, ResourceType
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.errors import InvalidConfigurationError

    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 1, {"retention.ms": "5000", "segment.ms": "600000"})
    resource = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.bytes": "123456"})
    ck = ck_admin(bootstrap)
    next(iter(ck.alter_configs([resource]).values())).result(15)
    configs = topic_configs(bootstrap, topic_name)
    assert configs["retention.bytes"].value == "123456" and configs["retention.bytes"].source == 1
    assert configs["retention.ms"].source == 5 and configs["segment.ms"].source == 5  # reset
    admin = kp_admin(bootstrap)
    try:
        ok = admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                   configs={"segment.bytes": "1048576"})])
        assert ok == {"topic": {topic_name: "OK"}}
        for incremental in (True, False):
            bad = admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                        configs={"segment.bytes": "-3"})],
                                      incremental=incremental)
            assert InvalidConfigurationError.__name__ in bad["topic"][topic_name]
    finally:
        admin.close()
    configs = topic_configs(bootstrap, topic_name)  # kafka-python sends it incrementally
    assert configs["segment.bytes"].value == "1048576" and configs["retention.bytes"].value == "123456"


def test_describe_log_dirs_kafka_python(module_server, topic_name):
    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 2)
    ck_produce(bootstrap, topic_name, [{"value": b"x" * 1000, "partition": 1}])
    admin = kp_admin(bootstrap)
    try:
        answers = admin.describe_log_dirs({topic_name: [0, 1]})
    finally:
        admin.close()
    [answer] = answers
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"].endswith("data")
    [topic] = log_dir["topics"]
    assert topic["name"] == topic_name
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 1000
    assert all(p["offset_lag"] == 0 for p in topic["partitions"])


# -- changes persist and act -----------------------------------------------------------------


def test_config_and_log_start_survive_restart_and_retention_acts(server_factory, topic_name):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    srv = server_factory(settings={"log.retention.check.interval.ms": 200})
    bootstrap = srv.bootstrap
    ck_create(bootstrap, topic_name, 2, {"segment.bytes": "1024"})
    ck_produce(bootstrap, topic_name, [{"value": b"r%03d" % i + b"." * 200, "partition": 0}
                                        for i in range(40)], **{"linger.ms": 0, "batch.num.messages": 1})
    from confluent_kafka import TopicPartition

    admin = ck_admin(bootstrap)
    assert watermarks(bootstrap, topic_name, 0)[0] == 0  # a week of retention: nothing goes
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    next(iter(admin.incremental_alter_configs([resource]).values())).result(15)
    wait_until(lambda: watermarks(bootstrap, topic_name, 0)[0] > 30, what="retention after retention.ms=1")
    ck_produce(bootstrap, topic_name, [{"value": b"p1-%d" % i, "partition": 1} for i in range(5)])
    next(iter(admin.delete_records([TopicPartition(topic_name, 1, 3)]).values())).result(15)
    srv.stop()
    srv.start()
    configs = topic_configs(bootstrap, topic_name)
    assert configs["retention.ms"].value == "1" and configs["segment.bytes"].value == "1024"
    assert watermarks(bootstrap, topic_name, 1) == (3, 5)
    got = ck_read(bootstrap, topic_name, [1], start={1: 0}, end={1: 5})
    assert [r.value for r in got] == [b"p1-3", b"p1-4"]


# -- every Kafka topic config -----------------------------------------------------------------

# Kafka 3.x/4.x topic configs with a valid non-default value each.
ALL_TOPIC_CONFIGS = {
    "cleanup.policy": "compact", "compression.type": "gzip", "compression.gzip.level": "5",
    "compression.lz4.level": "10", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000", "flush.messages": "1000", "flush.ms": "60000",
    "follower.replication.throttled.replicas": "*",
    "index.interval.bytes": "8192", "leader.replication.throttled.replicas": "0:1",
    "local.retention.bytes": "-2", "local.retention.ms": "-2", "max.compaction.lag.ms": "60000",
    "max.message.bytes": "2000000", "message.downconversion.enable": "false",
    "message.format.version": "3.0-IV1", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "3600000", "message.timestamp.difference.max.ms": "3600000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.1",
    "min.compaction.lag.ms": "1000", "min.insync.replicas": "1", "preallocate": "true",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "1000000", "retention.ms": "100000",
    "segment.bytes": "1048576", "segment.index.bytes": "65536", "segment.jitter.ms": "10",
    "segment.ms": "3600000", "unclean.leader.election.enable": "true",
}


def test_create_topics_accepts_every_kafka_topic_config(module_server, topic_name):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    bootstrap = module_server.bootstrap
    admin = ck_admin(bootstrap)
    good, bad = topic_name, topic_name + "-bad"
    futures = admin.create_topics([
        NewTopic(good, 1, 1, config=ALL_TOPIC_CONFIGS),
        NewTopic(bad, 1, 1, config={"min.cleanable.dirty.ratio": "1.5"}),
    ])
    futures[good].result(15)  # the bad topic fails alone
    assert ck_error(futures[bad]) == KafkaError.INVALID_CONFIG
    configs = topic_configs(bootstrap, good)
    for name in ALL_TOPIC_CONFIGS:
        assert configs[name].source == 1, name  # DYNAMIC_TOPIC_CONFIG
        assert not configs[name].is_read_only, name
    assert configs["min.cleanable.dirty.ratio"].value == "0.1"
    assert configs["preallocate"].value == "true"
    refused = admin.create_topics([NewTopic(bad, 1, 1, config={"compression.type": "brotli"})])
    assert ck_error(refused[bad]) == KafkaError.INVALID_CONFIG


def test_describe_configs_synonyms_kafka_python(server_factory, topic_name):
    from kafka.admin import ConfigResource, ConfigResourceType

    srv = server_factory(settings={"log.retention.ms": 3_600_000})
    ck_create(srv.bootstrap, topic_name, 1, {"segment.ms": "60000"})
    admin = kp_admin(srv.bootstrap)
    try:
        answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                        include_synonyms=True, config_filter="all")
    finally:
        admin.close()
    configs = answer["topic"][topic_name]

    def synonyms(name):
        return [(s["name"], s["value"], s["source"]) for s in configs[name]["synonyms"]]

    assert synonyms("segment.ms") == [("segment.ms", "60000", "DYNAMIC_TOPIC_CONFIG"),
                                      ("log.roll.ms", "604800000", "DEFAULT_CONFIG")]
    assert synonyms("retention.ms") == [("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"),
                                        ("log.retention.ms", "604800000", "DEFAULT_CONFIG")]
    assert configs["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert not configs["retention.ms"]["read_only"] and not configs["flush.ms"]["read_only"]
    assert synonyms("min.cleanable.dirty.ratio") == [
        ("log.cleaner.min.cleanable.ratio", "0.5", "DEFAULT_CONFIG")]


def test_alter_and_describe_configs_aiokafka(module_server, topic_name):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    bootstrap = module_server.bootstrap
    ck_create(bootstrap, topic_name, 1)

    async def alter() -> list:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            ok = await client.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, topic_name, {"retention.ms": "120000"})])
            bad = await client.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, topic_name, {"retention.ms": "two minutes"})])
            described = await client.describe_configs([ConfigResource(
                ConfigResourceType.TOPIC, topic_name)])
            return [ok, bad, described]
        finally:
            await client.close()

    ok, bad, described = aio_run(alter())
    assert [r[:2] for r in ok[0].resources] == [(0, None)]  # (error code, message)
    assert bad[0].resources[0][0] == 40  # INVALID_CONFIG
    entries = {entry[0]: entry for entry in described[0].resources[0][4]}
    assert entries["retention.ms"][1] == "120000"
    assert topic_configs(bootstrap, topic_name)["retention.ms"].value == "120000"


# -- dynamic broker configs -------------------------------------------------------------------


def broker_configs(bootstrap: str, node: str):
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = ck_admin(bootstrap)
    futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, node)])
    return next(iter(futures.values())).result(15)


def test_dynamic_broker_config_applies_to_inheriting_topics_and_persists(server_factory, topic_name):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    srv = server_factory(settings={"log.retention.check.interval.ms": 200, "node.id": 7})
    bootstrap = srv.bootstrap
    ck_create(bootstrap, topic_name, 1, {"segment.bytes": "1024"})
    own = topic_name + "-own"
    ck_create(bootstrap, own, 1, {"segment.bytes": "1024", "retention.ms": "604800000"})
    for name in (topic_name, own):
        ck_produce(bootstrap, name, [{"value": b"r%03d" % i + b"." * 200, "partition": 0}
                                     for i in range(20)], **{"linger.ms": 0, "batch.num.messages": 1})
    admin = ck_admin(bootstrap)

    def alter(node: str, *entries):
        resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
            ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in entries])
        return next(iter(admin.incremental_alter_configs([resource]).values()))

    assert ck_error(alter("7", ("num.partitions", "9"))) == KafkaError.INVALID_REQUEST  # static
    assert ck_error(alter("7", ("log.retention.ms", "soon"))) == KafkaError.INVALID_CONFIG
    alter("7", ("log.retention.ms", "1")).result(15)  # (the cluster default "": handler tests)
    configs = broker_configs(bootstrap, "7")
    assert configs["log.retention.ms"].value == "1" and configs["log.retention.ms"].source == 2
    assert not configs["log.retention.ms"].is_read_only and configs["num.partitions"].is_read_only
    described = topic_configs(bootstrap, topic_name)["retention.ms"]
    assert (described.value, described.source) == ("1", 2)  # DYNAMIC_BROKER_CONFIG
    wait_until(lambda: watermarks(bootstrap, topic_name, 0)[0] > 10, what="retention after log.retention.ms=1")
    assert watermarks(bootstrap, own, 0)[0] == 0  # its own retention.ms holds
    srv.stop()
    srv.start()
    configs = broker_configs(bootstrap, "7")
    assert configs["log.retention.ms"].value == "1"
    assert topic_configs(bootstrap, topic_name)["retention.ms"].value == "1"
