"""AlterPartitionReassignments / ListPartitionReassignments on one node, with the
authorizer on: CLUSTER ALTER and CLUSTER DESCRIBE as Kafka checks them, and the answers a
single node gives (its only valid target is itself; nothing is ever under way). The
cluster-mode moves are in tests/cluster/test_cluster_reassignment.py."""

from __future__ import annotations

import pytest
from helpers.acl_broker import ALICE, CAF, allow, call, with_authorizer

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from logserver.broker import Broker
from logserver.handlers import HANDLERS, reassignments
from logserver.security.acl import AclOperation, ResourceType

pytestmark = pytest.mark.timeout(30)


def alter_request(topic: str, replicas: list[int] | None) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0,
                                                                     replicas=replicas)])])


async def alter(broker: Broker, topic: str, replicas: list[int] | None) -> tuple[int, int]:
    response = await call(ALICE, reassignments.handle_alter, broker,
                          ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter_request(topic, replicas))
    return response.error_code, response.responses[0].partitions[0].error_code


def test_reassignment_apis_need_cluster_alter_and_describe_and_are_advertised() -> None:
    assert ApiKey.ALTER_PARTITION_REASSIGNMENTS in HANDLERS
    assert ApiKey.LIST_PARTITION_REASSIGNMENTS in HANDLERS

    async def scenario(broker: Broker) -> None:
        await broker.create_topic("t", 1, {})
        listing = ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None)
        assert await alter(broker, "t", [1]) == (CAF, CAF)
        refused = await call(ALICE, reassignments.handle_list, broker,
                             ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
        assert refused.error_code == CAF
        assert broker.authorizer is not None
        broker.authorizer.replace(frozenset({allow(ResourceType.CLUSTER, "kafka-cluster",
                                                   AclOperation.ALTER)}))
        assert await alter(broker, "t", [1]) == (ErrorCode.NONE, ErrorCode.NONE)
        assert await alter(broker, "t", [2]) == (ErrorCode.NONE, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        assert await alter(broker, "t", [1, 1]) == (ErrorCode.NONE, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        assert await alter(broker, "t", None) == (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        assert await alter(broker, "nope", [1]) == (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        seen = await call(ALICE, reassignments.handle_list, broker,
                          ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)  # DESCRIBE implied by ALTER
        assert (seen.error_code, seen.topics) == (ErrorCode.NONE, [])

    with_authorizer(scenario, [])
