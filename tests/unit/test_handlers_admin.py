"""The admin-change handlers on a Broker over the in-memory engine (no sockets): the
refusals the client tests (tests/integration/test_admin_changes.py) do not reach."""

from __future__ import annotations

import pytest
from helpers.memory_broker import call, with_broker

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DeleteRecordsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)
from logserver.broker import Broker
from logserver.groups.store import OFFSETS_TOPIC
from logserver.handlers import alter_configs, create_partitions, delete_records, describe_log_dirs

pytestmark = pytest.mark.timeout(30)


def grow(name: str, count: int, assignments: list[list[int]] | None = None,
         validate_only: bool = False) -> CreatePartitionsRequest:
    return CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else [
            CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=ids) for ids in assignments])],
        timeout_ms=5000, validate_only=validate_only)


def test_create_partitions_refusals() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic("g", 1, {})
        await broker.create_topic(OFFSETS_TOPIC, 1, {})

        async def error(request: CreatePartitionsRequest) -> int:
            response = await call(create_partitions.handle, broker, ApiKey.CREATE_PARTITIONS, 3, request)
            return response.results[0].error_code  # type: ignore[no-any-return]

        node = broker.node_id
        assert await error(grow("g", 3, [[node]])) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert await error(grow("g", 2, [[node + 1]])) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert await error(grow("g", 5)) == ErrorCode.POLICY_VIOLATION  # max.partitions 4
        assert await error(grow(OFFSETS_TOPIC, 2)) == ErrorCode.INVALID_REQUEST
        assert await error(grow("g", 3, [[node], [node]], validate_only=True)) == ErrorCode.NONE
        assert broker.storage.partition_count("g") == 1
        assert await error(grow("g", 3, [[node], [node]])) == ErrorCode.NONE
        assert broker.storage.partition_count("g") == 3
        twice = CreatePartitionsRequest(topics=grow("g", 4).topics * 2, timeout_ms=5000,
                                        validate_only=False)
        response = await call(create_partitions.handle, broker, ApiKey.CREATE_PARTITIONS, 3, twice)
        assert [r.error_code for r in response.results] == [ErrorCode.INVALID_REQUEST] * 2

    with_broker(scenario, **{"max.partitions": 4})


def test_delete_records_refuses_internal_topics_and_describe_log_dirs_filters() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic(OFFSETS_TOPIC, 1, {})
        await broker.create_topic("s", 2, {})
        request = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name=OFFSETS_TOPIC, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(
                partition_index=0, offset=-1)])], timeout_ms=5000)
        response = await call(delete_records.handle, broker, ApiKey.DELETE_RECORDS, 2, request)
        assert response.topics[0].partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        wanted = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(
            topic="s", partitions=[1, 9])])
        response = await call(describe_log_dirs.handle, broker, ApiKey.DESCRIBE_LOG_DIRS, 4, wanted)
        [result] = response.results
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == \
            [("s", [1])]
        everything = await call(describe_log_dirs.handle, broker, ApiKey.DESCRIBE_LOG_DIRS, 4,
                                DescribeLogDirsRequest(topics=None))
        assert {t.name for t in everything.results[0].topics} == {"s", OFFSETS_TOPIC}

    with_broker(scenario)


def test_config_changes_to_brokers_and_unknown_resources_are_refused() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic("c", 1, {"retention.ms": "1000"})
        request = AlterConfigsRequest(resources=[
            AlterConfigsRequest.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
                AlterConfigsRequest.AlterableConfig(name=key, value=value)])
            for rtype, name, key, value in [
                (4, str(broker.node_id), "num.partitions", "5"),  # a static broker setting
                (3, "group", "x", "1"),  # not a config resource here
                (2, "c", "retention.ms", None),  # AlterConfigs needs values
                (2, "c", "segment.ms", "60000"),
            ]], validate_only=False)
        response = await call(alter_configs.handle_alter, broker, ApiKey.ALTER_CONFIGS, 2, request)
        assert [r.error_code for r in response.responses] == [
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
            ErrorCode.NONE]
        assert broker.storage.topic_overrides("c") == {"segment.ms": "60000"}  # replaced
        duplicated = IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="c", configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(name="segment.ms", config_operation=0,
                                                               value=v) for v in ("1", "2")])],
            validate_only=False)
        response = await call(alter_configs.handle_incremental, broker,
                              ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, duplicated)
        assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
        assert broker.storage.topic_overrides("c") == {"segment.ms": "60000"}

    with_broker(scenario)


def test_dynamic_broker_configs_cluster_default_and_this_broker() -> None:
    async def scenario(broker: Broker) -> None:
        await broker.create_topic("b", 1, {})

        async def alter(node: str, *ops: tuple[str, int, str | None]) -> int:
            request = IncrementalAlterConfigsRequest(resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=4, resource_name=node, configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name=name, config_operation=op, value=value) for name, op, value in ops])],
                validate_only=False)
            response = await call(alter_configs.handle_incremental, broker,
                                  ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
            return response.responses[0].error_code  # type: ignore[no-any-return]

        node = str(broker.node_id)
        assert await alter("", ("log.retention.ms", 0, "60000")) == ErrorCode.NONE
        assert await alter(node, ("log.retention.ms", 0, "70000")) == ErrorCode.NONE
        assert await alter("", ("log.cleanup.policy", 2, "compact")) == ErrorCode.NONE  # APPEND
        assert await alter("99", ("log.retention.ms", 0, "1")) == ErrorCode.INVALID_REQUEST
        config = broker.storage.topic_config("b")
        assert config is not None and config.retention_ms == 70000 and config.compact
        assert await alter(node, ("log.retention.ms", 1, None)) == ErrorCode.NONE  # DELETE
        config = broker.storage.topic_config("b")
        assert config is not None and config.retention_ms == 60000  # the cluster default again
        assert broker.storage.broker_overrides().cluster_default == {
            "log.retention.ms": "60000", "log.cleanup.policy": "delete,compact"}  # APPEND keeps the order, as Kafka

    with_broker(scenario)
