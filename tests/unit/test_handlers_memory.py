"""Request handlers called with decoded request objects on a Broker whose storage is the
in-memory engine: no sockets, no files, fast. The same handlers run against the segment
log in the server tests; tests/unit/test_storage_contract.py keeps the two engines alike."""

from __future__ import annotations

import asyncio

import pytest
from helpers.memory_broker import call, with_broker

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkaproto.records import build_batch, decode_batch
from logserver.broker import Broker
from logserver.groups.store import OFFSETS_TOPIC, OffsetsStore
from logserver.handlers import (
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from logserver.topic_config import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG

# Values refused with INVALID_CONFIG: out of Kafka's range, no such codec, or a meaning
# this server cannot honour (tiered storage).
REFUSED = {"flush.messages": "0", "flush.ms": "-1", "compression.type": "brotli",
           "remote.storage.enable": "true"}


pytestmark = pytest.mark.timeout(30)


def create_request(name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                   validate_only: bool = False) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])],
        timeout_ms=5000, validate_only=validate_only)


def produce_request(topic: str, partition: int, *values: bytes, acks: int = 1) -> ProduceRequest:
    batch = build_batch([(None, v, (), 1_000 + i) for i, v in enumerate(values)])
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=memoryview(bytearray(batch)))])])


def fetch_request(topic: str, partition: int, offset: int, *, wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])


def values_of(records: bytes) -> list[bytes | None]:
    out: list[bytes | None] = []
    position = 0
    while position < len(records):
        header, decoded = decode_batch(records, position)
        out.extend(r.value for r in decoded)
        position += header.size
    return out


def test_create_produce_fetch_list_delete() -> None:
    async def scenario(broker: Broker) -> None:
        created = await call(create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                             create_request("t", 2, {"retention.ms": "1000"}))
        result = created.topics[0]
        assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 2)
        assert result.topic_id == broker.storage.topic_id("t")
        configs = {c.name: (c.value, c.config_source) for c in result.configs}
        assert configs["retention.ms"] == ("1000", DYNAMIC_TOPIC_CONFIG)
        assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)

        again = await call(create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7, create_request("t"))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

        produced = await call(produce.handle, broker, ApiKey.PRODUCE, 9,
                              produce_request("t", 1, b"a", b"b"))
        part = produced.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
        assert await call(produce.handle, broker, ApiKey.PRODUCE, 9,
                          produce_request("t", 1, b"c", acks=0)) is None

        fetched = await call(fetch.handle, broker, ApiKey.FETCH, 12, fetch_request("t", 1, 0))
        data = fetched.responses[0].partitions[0]
        assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 3)
        assert values_of(data.records) == [b"a", b"b", b"c"]
        missing = await call(fetch.handle, broker, ApiKey.FETCH, 12, fetch_request("nope", 0, 0))
        assert missing.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        listed = await call(list_offsets.handle, broker, ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=1, timestamp=ts)
                                      for ts in (-1, -2, -3, 1_001)])]))
        assert [(p.offset, p.timestamp) for p in listed.topics[0].partitions] == [
            (3, -1), (0, -1), (1, 1_001), (1, 1_001)]

        deleted = await call(delete_topics.handle, broker, ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name="t", topic_id=bytes(16))], timeout_ms=5000))
        assert deleted.responses[0].error_code == ErrorCode.NONE
        assert broker.storage.topic_names() == []

    with_broker(scenario)


def test_long_poll_fetch_is_woken_by_a_produce() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic("lp", 1, {})
        waiting = asyncio.ensure_future(call(fetch.handle, broker, ApiKey.FETCH, 12,
                                             fetch_request("lp", 0, 0, wait_ms=10_000)))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await call(produce.handle, broker, ApiKey.PRODUCE, 9, produce_request("lp", 0, b"late"))
        response = await asyncio.wait_for(waiting, 5)
        assert values_of(response.responses[0].partitions[0].records) == [b"late"]

    with_broker(scenario)


def test_create_topics_refuses_settings_it_does_not_apply() -> None:
    async def scenario(broker: Broker) -> None:
        for key, value in REFUSED.items():
            response = await call(create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                                  create_request("r", configs={key: value}))
            result = response.topics[0]
            assert result.error_code == ErrorCode.INVALID_CONFIG
            assert key in result.error_message
        checked = await call(create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                             create_request("v", configs={"segment.bytes": "4096"}, validate_only=True))
        assert checked.topics[0].error_code == ErrorCode.NONE
        assert broker.storage.topic_names() == []  # validate_only creates nothing

    with_broker(scenario)


def test_describe_configs_reports_values_and_sources() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic("d", 1, {"cleanup.policy": "compact"})
        response = await call(describe_configs.handle, broker, ApiKey.DESCRIBE_CONFIGS, 4,
                              DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
                                  resource_type=2, resource_name="d", configuration_keys=None)],
                                  include_synonyms=False, include_documentation=False))
        entries = {c.name: (c.value, c.config_source) for c in response.results[0].configs}
        assert entries["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
        assert entries["retention.ms"] == ("3600000", STATIC_BROKER_CONFIG)  # log.retention.ms
        assert entries["min.insync.replicas"] == ("1", DEFAULT_CONFIG)  # described
        assert entries["flush.messages"][1] == DEFAULT_CONFIG

    with_broker(scenario, **{"log.retention.ms": 3_600_000})


def test_metadata_auto_creates_and_init_producer_id() -> None:
    async def scenario(broker: Broker) -> None:
        response = await call(metadata.handle, broker, ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="auto", topic_id=bytes(16))],
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        topic = response.topics[0]
        assert (topic.error_code, len(topic.partitions)) == (ErrorCode.NONE, 2)
        assert topic.topic_id == broker.storage.topic_id("auto")
        response = await call(metadata.handle, broker, ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC, topic_id=bytes(16))],
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        assert response.topics[0].is_internal and broker.storage.partition_count(OFFSETS_TOPIC) == 1
        produced = await call(produce.handle, broker, ApiKey.PRODUCE, 9,
                              produce_request(OFFSETS_TOPIC, 0, b"x"))
        assert produced.responses[0].partition_responses[0].error_code == \
            ErrorCode.INVALID_TOPIC_EXCEPTION
        ids = [await call(init_producer_id.handle, broker, ApiKey.INIT_PRODUCER_ID, 4,
                          InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                producer_id=-1, producer_epoch=-1))
               for _ in range(3)]
        assert len({r.producer_id for r in ids}) == 3

    with_broker(scenario)


def test_metadata_by_topic_id_ignores_the_names_beside() -> None:
    """Java's AdminClient.describeTopics(TopicCollection.ofTopicIds(...)) sends each id with
    the name "" (its default): Kafka answers by id, names ignored, each id once."""
    async def scenario(broker: Broker) -> None:
        await call(create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7, create_request("named", 2))
        known, unknown = broker.storage.topic_id("named"), bytes(range(1, 17))
        response = await call(metadata.handle, broker, ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="", topic_id=known),
                    MetadataRequest.MetadataRequestTopic(name="", topic_id=unknown),
                    MetadataRequest.MetadataRequestTopic(name="", topic_id=known)],
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        assert [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in response.topics] == [
            (ErrorCode.NONE, "named", known, 2), (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown, 0)]
        assert broker.storage.partition_count("") is None

    with_broker(scenario)


def test_offsets_store_on_the_memory_engine() -> None:
    async def scenario(broker: Broker) -> None:
        store = OffsetsStore(broker)
        assert not store.exists()
        outcome = store.append("g", [(b"k1", b"v1")], now_ms=5)  # creates the topic first
        assert outcome.wait is not None
        await outcome.wait
        assert store.exists() and outcome.base_offset == 0
        for i in range(20):
            assert store.append("g", [(b"k%d" % (i % 3), b"v%d" % i)]).error == ErrorCode.NONE
        assert [e.key for e in store.iter_log(0)][:2] == [b"k1", b"k0"]
        assert len(list(store.iter_log(0))) == 21
        snapshot = {0: [(b"k0", b"live-0", 1), (b"k1", b"live-1", 2)]}
        assert await store.rewrite(snapshot) == 21
        entries = list(store.iter_log(0))
        assert [(e.offset, e.key, e.value) for e in entries] == [
            (21, b"k0", b"live-0"), (22, b"k1", b"live-1")]

    with_broker(scenario)
