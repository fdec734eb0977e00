"""The transaction APIs' ACL checks (Kafka's KafkaApis rules) for named principals: decoded
requests against a Broker on the in-memory storage engine with the authorizer on, in the
style of tests/unit/test_security_handlers.py. A real confluent-kafka transactional producer
against a real server is in tests/integration/test_security_txn_client.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from helpers.acl_broker import (
    ADMIN,
    ALICE,
    BOB,
    CAF,
    GAF,
    TAF,
    allow,
    call,
    topics_request,
    with_authorizer,
)

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafkaproto.records import build_batch
from logserver.broker import Broker
from logserver.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    create_topics,
    describe_producers,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
    produce,
    txn_offset_commit,
    write_txn_markers,
)
from logserver.security.acl import AclOperation as Op
from logserver.security.acl import ResourceType

pytestmark = pytest.mark.timeout(30)

XAF = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NONE = ErrorCode.NONE
T0 = 1_700_000_000_000

ACLS = [allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE),
        allow(ResourceType.TOPIC, "t", Op.WRITE), allow(ResourceType.TOPIC, "t", Op.READ),
        allow(ResourceType.GROUP, "g", Op.READ), allow(ResourceType.GROUP, "g-desc", Op.DESCRIBE),
        allow(ResourceType.TOPIC, "d", Op.DESCRIBE)]


async def init(broker: Broker, principal: str, txn_id: str) -> tuple[int, int, int]:
    r = await call(principal, init_producer_id.handle, broker, ApiKey.INIT_PRODUCER_ID, 4,
                   InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60_000,
                                         producer_id=-1, producer_epoch=-1))
    return r.error_code, r.producer_id, r.producer_epoch


async def add_partitions(broker: Broker, principal: str, txn_id: str, pid: int, epoch: int,
                         topics: Iterable[str]) -> dict[str, int]:
    r = await call(principal, add_partitions_to_txn.handle, broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                   AddPartitionsToTxnRequest(transactional_id=txn_id, producer_id=pid,
                                             producer_epoch=epoch, topics=[
                       AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=[0])
                       for t in topics]))
    return {t.name: t.results[0].partition_error_code for t in r.results}


async def produce_txn(broker: Broker, principal: str, txn_id: str, pid: int, epoch: int,
                      topics: Iterable[str]) -> dict[str, int]:
    r = await call(principal, produce.handle, broker, ApiKey.PRODUCE, 9, ProduceRequest(
        transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=t, partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=memoryview(bytearray(build_batch(
                    [(b"k", b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                    base_sequence=0, is_transactional=True))))])
            for t in topics]))
    return {t.name: t.partition_responses[0].error_code for t in r.responses}


async def add_offsets(broker: Broker, principal: str, txn_id: str, pid: int, epoch: int,
                      group: str) -> int:
    r = await call(principal, add_offsets_to_txn.handle, broker, ApiKey.ADD_OFFSETS_TO_TXN, 3,
                   AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid,
                                          producer_epoch=epoch, group_id=group))
    return int(r.error_code)


async def txn_commit(broker: Broker, principal: str, txn_id: str, pid: int, epoch: int,
                     group: str, topics: Iterable[str]) -> dict[str, int]:
    Topic, Partition = (TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic,
                        TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition)
    r = await call(principal, txn_offset_commit.handle, broker, ApiKey.TXN_OFFSET_COMMIT, 2,
                   TxnOffsetCommitRequest(transactional_id=txn_id, group_id=group, producer_id=pid,
                                          producer_epoch=epoch, topics=[
                       Topic(name=t, partitions=[Partition(partition_index=0, committed_offset=1,
                                                           committed_leader_epoch=-1,
                                                           committed_metadata="")])
                       for t in topics]))
    return {t.name: t.partitions[0].error_code for t in r.topics}


async def end(broker: Broker, principal: str, txn_id: str, pid: int, epoch: int) -> int:
    r = await call(principal, end_txn.handle, broker, ApiKey.END_TXN, 3,
                   EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                 committed=True))
    return int(r.error_code)


def test_a_transactional_producer_needs_write_on_its_transactional_id() -> None:
    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                   topics_request("t", "x"))
        assert (await init(broker, ALICE, "other"))[0] == XAF
        error, pid, epoch = await init(broker, ALICE, "tx")
        assert error == NONE

        # Someone else (bob) may not use alice's transactional id, even with her producer id.
        assert await add_partitions(broker, BOB, "tx", pid, epoch, ["t"]) == {"t": XAF}
        # Topics without WRITE fail alone (known or not: existence is not revealed).
        assert await add_partitions(broker, ALICE, "tx", pid, epoch, ["t", "x", "ghost"]) == {
            "t": ErrorCode.OPERATION_NOT_ATTEMPTED, "x": TAF, "ghost": TAF}
        assert await add_partitions(broker, ALICE, "tx", pid, epoch, ["t"]) == {"t": NONE}

        # Produce of transactional batches: WRITE on the id first, for every partition.
        assert await produce_txn(broker, BOB, "tx", pid, epoch, ["t", "x"]) == {"t": XAF, "x": XAF}
        assert await produce_txn(broker, ALICE, "tx", pid, epoch, ["t"]) == {"t": NONE}

        assert await add_offsets(broker, BOB, "tx", pid, epoch, "g") == XAF
        assert await add_offsets(broker, ALICE, "tx", pid, epoch, "g-desc") == GAF  # not READ
        assert await add_offsets(broker, ALICE, "tx", pid, epoch, "g") == NONE

        assert await txn_commit(broker, BOB, "tx", pid, epoch, "g", ["t"]) == {"t": XAF}
        assert await txn_commit(broker, ALICE, "tx", pid, epoch, "g-desc", ["t", "x"]) == {
            "t": GAF, "x": GAF}
        assert await txn_commit(broker, ALICE, "tx", pid, epoch, "g", ["t", "x"]) == {
            "t": NONE, "x": TAF}

        assert await end(broker, BOB, "tx", pid, epoch) == XAF
        assert await end(broker, ALICE, "tx", pid, epoch) == NONE

    with_authorizer(scenario, ACLS)


def test_transactions_are_described_and_listed_only_where_the_principal_may_describe() -> None:
    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                   topics_request("t", "d", "x"))
        # The admin (a super user) leaves a transaction open over three topics.
        error, pid, epoch = await init(broker, ADMIN, "tx")
        assert error == NONE
        assert await add_partitions(broker, ADMIN, "tx", pid, epoch, ["t", "d", "x"]) == {
            "t": NONE, "d": NONE, "x": NONE}
        assert (await init(broker, ADMIN, "hidden"))[0] == NONE

        async def describe(principal: str) -> list[tuple[str, int, list[str]]]:
            r = await call(principal, describe_transactions.handle, broker,
                           ApiKey.DESCRIBE_TRANSACTIONS, 0,
                           DescribeTransactionsRequest(transactional_ids=["tx", "hidden"]))
            return [(s.transactional_id, s.error_code, [t.topic for t in s.topics])
                    for s in r.transaction_states]

        # WRITE on "tx" implies DESCRIBE; topics alice may not DESCRIBE ("x") are left out.
        assert await describe(ALICE) == [("tx", NONE, ["d", "t"]), ("hidden", XAF, [])]
        assert await describe(BOB) == [("tx", XAF, []), ("hidden", XAF, [])]
        assert await describe(ADMIN) == [("tx", NONE, ["d", "t", "x"]), ("hidden", NONE, [])]

        async def listed(principal: str) -> list[str]:
            r = await call(principal, list_transactions.handle, broker, ApiKey.LIST_TRANSACTIONS, 1,
                           ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                   duration_filter=-1))
            assert r.error_code == NONE
            return sorted(s.transactional_id for s in r.transaction_states)

        assert await listed(ALICE) == ["tx"]
        assert await listed(BOB) == []
        assert await listed(ADMIN) == ["hidden", "tx"]

    with_authorizer(scenario, ACLS)


def test_producers_need_read_and_markers_need_cluster_action() -> None:
    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                   topics_request("t", "d"))
        error, pid, epoch = await init(broker, ADMIN, "tx")
        assert error == NONE
        assert await add_partitions(broker, ADMIN, "tx", pid, epoch, ["t"]) == {"t": NONE}
        assert await produce_txn(broker, ADMIN, "tx", pid, epoch, ["t"]) == {"t": NONE}

        r = await call(ALICE, describe_producers.handle, broker, ApiKey.DESCRIBE_PRODUCERS, 0,
                       DescribeProducersRequest(topics=[
                           DescribeProducersRequest.TopicRequest(name=n, partition_indexes=[0])
                           for n in ("t", "d", "ghost")]))
        seen: dict[str, Any] = {t.name: t.partitions[0] for t in r.topics}
        assert {n: p.error_code for n, p in seen.items()} == {"t": NONE, "d": TAF, "ghost": TAF}
        assert [s.producer_id for s in seen["t"].active_producers] == [pid]
        assert seen["d"].active_producers == []  # DESCRIBE is not READ

        def markers(topics: Iterable[str]) -> WriteTxnMarkersRequest:
            return WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=pid, producer_epoch=epoch, transaction_result=False,
                coordinator_epoch=0, topics=[
                    WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=[0])
                    for t in topics])])

        async def write(principal: str, topics: Iterable[str]) -> dict[str, int]:
            r = await call(principal, write_txn_markers.handle, broker, ApiKey.WRITE_TXN_MARKERS, 1,
                           markers(topics))
            return {t.name: t.partitions[0].error_code for t in r.markers[0].topics}

        assert await write(ALICE, ["t", "ghost"]) == {"t": CAF, "ghost": CAF}
        assert broker.authorizer is not None
        broker.authorizer.replace(frozenset(
            [*ACLS, allow(ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)]))
        # The admin abort of the hanging transaction goes through with CLUSTER_ACTION.
        assert await write(ALICE, ["t", "ghost"]) == {"t": NONE,
                                                     "ghost": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        r = await call(ALICE, describe_producers.handle, broker, ApiKey.DESCRIBE_PRODUCERS, 0,
                       DescribeProducersRequest(topics=[
                           DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])]))
        assert [p.current_txn_start_offset for p in r.topics[0].partitions[0].active_producers] == [-1]

    with_authorizer(scenario, ACLS)
