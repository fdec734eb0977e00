"""Produce, Fetch, Metadata and CreateTopics as a cluster member serves them.

The dispatcher uses these instead of logserver/handlers/ when cluster mode is on. They
answer from the ClusterModel (who leads what, at which epoch), refuse what this broker
does not lead (NOT_LEADER_OR_FOLLOWER) or a stale epoch (FENCED_LEADER_EPOCH), make
acks=all wait for the high watermark, and cap consumers' reads at it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

from kafkaproto import ApiKey, ErrorCode, FileRegion, RequestHeader
from kafkaproto.batch import parse_header
from kafkaproto.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
)
from logserver.cluster.epochs import UNDEFINED, end_offset_for_epoch
from logserver.cluster.node import TopicCreationError
from logserver.groups import INTERNAL_TOPICS, OFFSETS_TOPIC
from logserver.handlers import Handler
from logserver.handlers import find_coordinator as single_node_find_coordinator
from logserver.handlers import init_producer_id as single_node_init_producer_id
from logserver.storage.api import MAX_TIMESTAMP, InvalidConfigError
from logserver.topic_config import validate_overrides
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode

log = logging.getLogger(__name__)

ZERO_UUID = bytes(16)
PartitionResponse = ProduceResponse.PartitionProduceResponse
PartitionData = FetchResponse.PartitionData
CREATE_VISIBLE_TIMEOUT_S = 5.0


def _node(broker: Broker) -> ClusterNode:
    node = broker.cluster
    assert node is not None, "cluster handlers serve only in cluster mode"
    return node


def _leader_error(node: ClusterNode, topic: str, index: int) -> int:
    state = node.model.partition(topic, index)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if state.leader != node.node_id or (topic, index) not in node.leaders:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


# -- Produce ----------------------------------------------------------------------------------

def produce(broker: Broker, header: RequestHeader, request: ProduceRequest) -> (
        ProduceResponse | Awaitable[ProduceResponse] | None):
    node = _node(broker)
    acks = request.acks
    if request.transactional_id is not None:
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif acks not in (-1, 0, 1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
    else:
        error = ErrorCode.NONE
    waits: list[tuple[PartitionResponse, tuple[str, int], Awaitable[Any]]] = []
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            where = (topic.name, data.index)
            refused = error or _leader_error(node, *where)
            state = node.model.partition(*where)
            if not refused and topic.name in INTERNAL_TOPICS:
                refused = ErrorCode.INVALID_TOPIC_EXCEPTION
            if not refused and acks == -1 and state is not None and len(state.isr) < node.min_isr:
                refused = ErrorCode.NOT_ENOUGH_REPLICAS
            if refused:
                partitions.append(PartitionResponse(index=data.index, error_code=refused, base_offset=-1))
                continue
            records = cast("memoryview | None", data.records)
            result = broker.storage.append(topic.name, data.index, records, header.api_version)
            response = PartitionResponse(
                index=data.index, error_code=result.error, base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                error_message=result.message)
            partitions.append(response)
            if result.error != ErrorCode.NONE or records is None:
                continue
            node.advance(where)
            if result.wait is not None:
                waits.append((response, where, result.wait))
            if acks == -1:
                end = result.base_offset + parse_header(records).last_offset_delta + 1
                waits.append((response, where, node.leaders[where].wait_for(end)))
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None
    answer = ProduceResponse(responses=topics, throttle_time_ms=0)
    if not waits:
        return answer
    return _after_waits(node, answer, waits, request.timeout_ms / 1000)


async def _after_waits(node: ClusterNode, answer: ProduceResponse,
                       waits: list[tuple[PartitionResponse, tuple[str, int], Awaitable[Any]]],
                       timeout_s: float) -> ProduceResponse:
    tasks = [asyncio.ensure_future(w) for _, _, w in waits]
    done, _ = await asyncio.wait(tasks, timeout=max(timeout_s, 0.001))
    for (response, where, _), task in zip(waits, tasks, strict=True):
        if response.error_code != ErrorCode.NONE:
            continue
        if task not in done:
            task.cancel()
            response.error_code = ErrorCode.REQUEST_TIMED_OUT
        elif task.exception() is not None:
            response.error_code = ErrorCode.KAFKA_STORAGE_ERROR  # fsync failed
        elif isinstance(task.result(), int) and task.result() != ErrorCode.NONE:
            response.error_code = task.result()
        else:
            state = node.model.partition(*where)
            if state is not None and len(state.isr) < node.min_isr and isinstance(task.result(), int):
                response.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return answer


# -- Fetch ------------------------------------------------------------------------------------

def fetch(broker: Broker, header: RequestHeader, request: FetchRequest) -> (
        FetchResponse | Awaitable[FetchResponse]):
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    node = _node(broker)
    if request.replica_id >= 0:
        for topic in request.topics:
            for wanted in topic.partitions:
                node.follower_fetched((topic.topic, wanted.partition), request.replica_id,
                                      wanted.fetch_offset)
    response, size, waitable = _build(node, request, header.api_version)
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not waitable:
        return response
    return _long_poll(node, request, header.api_version, waitable)


async def _long_poll(node: ClusterNode, request: FetchRequest, version: int,
                     partitions: list[tuple[str, int]]) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while True:
        await node.storage.wait_for_append(partitions, deadline - loop.time())
        response, size, partitions = _build(node, request, version)
        if size >= request.min_bytes or loop.time() >= deadline or not partitions:
            return response
        for topic in response.responses:
            for partition in topic.partitions:
                if isinstance(partition.records, FileRegion):
                    partition.records.release()


def _epoch_error(node: ClusterNode, topic: str, index: int, current_epoch: int) -> int:
    error = _leader_error(node, topic, index)
    state = node.model.partition(topic, index)
    if error or state is None or current_epoch < 0:
        return error
    if current_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_epoch > state.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def _build(node: ClusterNode, request: FetchRequest, version: int) -> (
        tuple[FetchResponse, int, list[tuple[str, int]]]):
    storage = node.storage
    replica = request.replica_id >= 0
    budget = request.max_bytes if version >= 3 else 2**31 - 1
    total = 0
    waitable: list[tuple[str, int]] = []
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            error = _epoch_error(node, topic.topic, wanted.partition, wanted.current_leader_epoch)
            if error:
                results.append(PartitionData(
                    partition_index=wanted.partition, error_code=error, high_watermark=-1,
                    last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[], records=b""))
                continue
            limit = max(0, min(wanted.partition_max_bytes, budget - total))
            read = storage.read(topic.topic, wanted.partition, wanted.fetch_offset, limit,
                                min_one=total < budget, fetch_version=version, replica=replica)
            if read.error == ErrorCode.NONE:
                waitable.append((topic.topic, wanted.partition))
            total += read.size
            results.append(PartitionData(
                partition_index=wanted.partition, error_code=read.error,
                high_watermark=read.high_watermark, last_stable_offset=read.high_watermark,
                log_start_offset=read.log_start_offset, aborted_transactions=[],
                preferred_read_replica=-1, records=read.records))
        topics.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=results))
    return (FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics),
            total, waitable)


# -- ListOffsets ------------------------------------------------------------------------------

def list_offsets(broker: Broker, header: RequestHeader,
                 request: ListOffsetsRequest) -> ListOffsetsResponse:
    """Answered by the partition's leader only, and never beyond the high watermark."""
    node = _node(broker)
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            where = (topic.name, wanted.partition_index)
            error = _epoch_error(node, *where, wanted.current_leader_epoch)
            timestamp = wanted.timestamp
            if timestamp == MAX_TIMESTAMP and header.api_version < 7:
                timestamp = -4  # not a special value before v7: refused like any negative
            listed = None if error else node.storage.list_offset(*where, timestamp)
            if listed is None or listed.error != ErrorCode.NONE:
                results.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=wanted.partition_index,
                    error_code=error or (listed.error if listed else ErrorCode.UNKNOWN_SERVER_ERROR),
                    timestamp=-1, offset=-1))
                continue
            hw = node.storage.high_watermark(*where)
            offset, stamp = listed.offset, listed.timestamp
            if hw is not None and offset > hw:
                offset, stamp = -1, -1
            state = node.model.partition(*where)
            results.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                timestamp=stamp, offset=offset,
                leader_epoch=state.leader_epoch if state is not None else -1))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=results))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


# -- Metadata ---------------------------------------------------------------------------------

def metadata(broker: Broker, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    node = _node(broker)
    version = header.api_version
    if request.topics is None or (version == 0 and not request.topics):
        wanted: list[str | None] = list(sorted(node.model.topics))
    else:
        wanted = [t.name if t.name is not None else _name_for_id(node, t.topic_id)
                  for t in request.topics]
    allow = (request.allow_auto_topic_creation if version >= 4 else True) \
        and broker.config["auto.create.topics.enable"]
    missing = [n for n in wanted if n is not None and n not in node.model.topics
               and topic_name_error(n) is None and n not in INTERNAL_TOPICS]
    if allow and missing:
        return _after_creating(broker, node, wanted, missing)
    return _metadata_response(broker, node, wanted, {})


def _name_for_id(node: ClusterNode, topic_id: bytes | None) -> str | None:
    return next((n for n, r in node.model.topics.items() if r.topic_id == topic_id), None)


async def _after_creating(broker: Broker, node: ClusterNode, wanted: list[str | None],
                          missing: list[str]) -> MetadataResponse:
    errors: dict[str, int] = {}
    for name in dict.fromkeys(missing):
        try:
            await create_and_wait(node, name, broker.config["num.partitions"],
                                  broker.config["default.replication.factor"], {})
            errors[name] = ErrorCode.LEADER_NOT_AVAILABLE  # clients ask again shortly
        except TopicCreationError as exc:
            errors[name] = (ErrorCode.LEADER_NOT_AVAILABLE
                            if exc.error == ErrorCode.TOPIC_ALREADY_EXISTS else exc.error)
    return _metadata_response(broker, node, wanted, errors)


def _metadata_response(broker: Broker, node: ClusterNode, wanted: list[str | None],
                       errors: dict[str, int]) -> MetadataResponse:
    model = node.model
    live = set(model.brokers)
    topics = []
    for name in wanted:
        record = model.topics.get(name) if name is not None else None
        if name is None or record is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else errors.get(
                name, ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            topics.append(MetadataResponse.MetadataResponseTopic(
                error_code=error, name=name, topic_id=ZERO_UUID, partitions=[]))
            continue
        # As Kafka's metadata cache: a leader that is not among the live brokers listed is
        # no leader (clients look the node id up in the broker list; kafka-python's
        # sender fails on one it cannot find).
        partitions = [
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE if state.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index, leader_id=state.leader if state.leader in live else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas), isr_nodes=list(state.isr),
                offline_replicas=state.offline_replicas(live))
            for index, state in model.topic_partitions(name)]
        topics.append(MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=record.topic_id,
            is_internal=name in INTERNAL_TOPICS, partitions=partitions))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host,
                                                         port=b.port, rack=b.rack)
                 for b in sorted(model.brokers.values(), key=lambda b: b.node_id)],
        cluster_id=model.cluster_id or broker.cluster_id,
        controller_id=model.controller_id if model.controller_id is not None else node.node_id,
        topics=topics)


# -- CreateTopics -----------------------------------------------------------------------------

async def create_and_wait(node: ClusterNode, name: str, partitions: int, replication_factor: int,
                          configs: dict[str, str]) -> None:
    """Create through etcd, then wait (bounded) until our own watch has seen it, so the
    client's next Metadata to this broker finds the topic."""
    await node.create_topic(name, partitions, replication_factor, configs)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CREATE_VISIBLE_TIMEOUT_S
    while name not in node.model.topics and loop.time() < deadline:
        await asyncio.sleep(0.01)


async def create_topics(broker: Broker, header: RequestHeader,
                        request: CreateTopicsRequest) -> CreateTopicsResponse:
    node = _node(broker)
    results = []
    deadline = asyncio.get_running_loop().time() + max(request.timeout_ms, 0) / 1000
    for topic in request.topics:
        results.append(await _create_one(broker, node, topic, request.validate_only, deadline))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _result(name: str, error: int, message: str | None, partitions: int = -1,
            replication_factor: int = -1, topic_id: bytes = ZERO_UUID) -> Any:
    return CreateTopicsResponse.CreatableTopicResult(
        name=name, topic_id=topic_id, error_code=error, error_message=message,
        num_partitions=partitions, replication_factor=replication_factor, configs=None)


async def _create_one(broker: Broker, node: ClusterNode, topic: CreateTopicsRequest.CreatableTopic,
                      validate_only: bool, deadline: float) -> Any:
    name = topic.name
    invalid = topic_name_error(name)
    if invalid is not None:
        return _result(name, ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    if name in node.model.topics:
        return _result(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if topic.assignments:
        return _result(name, ErrorCode.INVALID_REQUEST,
                       "manual replica assignments are not supported in cluster mode yet")
    partitions = broker.config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    rf = (broker.config["default.replication.factor"] if topic.replication_factor == -1
          else topic.replication_factor)
    if partitions < 1:
        return _result(name, ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
    if not 1 <= rf <= len(node.model.brokers):
        return _result(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"replication factor {rf} is larger than the {len(node.model.brokers)} live brokers")
    try:
        overrides = validate_overrides({c.name: c.value for c in topic.configs})
    except InvalidConfigError as exc:
        return _result(name, ErrorCode.INVALID_CONFIG, str(exc))
    if validate_only:
        return _result(name, ErrorCode.NONE, None, partitions, rf)
    loop = asyncio.get_running_loop()
    while True:
        try:
            await create_and_wait(node, name, partitions, rf, overrides)
            break
        except TopicCreationError as exc:
            return _result(name, exc.error, str(exc))
        except Exception as exc:  # etcd unreachable: try again within the request's timeout
            if loop.time() >= deadline:
                log.error("creating topic %s in etcd failed: %s", name, exc)
                return _result(name, ErrorCode.REQUEST_TIMED_OUT, f"cluster metadata store: {exc}")
            await asyncio.sleep(0.2)
    return _result(name, ErrorCode.NONE, None, partitions, rf, node.model.topics[name].topic_id)


# -- OffsetForLeaderEpoch (internal: followers ask it before fetching) ------------------------

def offset_for_leader_epoch(broker: Broker, header: RequestHeader,
                            request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    node = _node(broker)
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            error = _epoch_error(node, topic.topic, wanted.partition, wanted.current_leader_epoch)
            epoch, end = UNDEFINED
            if not error:
                state = node.model.partition(topic.topic, wanted.partition)
                assert state is not None
                if wanted.leader_epoch == state.leader_epoch:
                    epoch = state.leader_epoch
                    end = node.storage.log_end_offset(topic.topic, wanted.partition) or 0
                elif wanted.leader_epoch < state.leader_epoch:
                    epoch, end = end_offset_for_epoch(node.storage, topic.topic, wanted.partition,
                                                      wanted.leader_epoch)
            results.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                error_code=error, partition=wanted.partition, leader_epoch=epoch, end_offset=end))
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
            topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


# -- DeleteTopics -----------------------------------------------------------------------------

async def delete_topics(broker: Broker, header: RequestHeader,
                        request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    node = _node(broker)
    if header.api_version >= 6:
        wanted = [(t.name if t.name is not None else _name_for_id(node, t.topic_id), t.topic_id)
                  for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        record = node.model.topics.get(name) if name is not None else None
        if record is None or name is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message="no such topic"))
            continue
        if not broker.config["delete.topic.enable"] or name in INTERNAL_TOPICS:
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                error_message="delete.topic.enable is false"))
            continue
        try:
            deleted = await node.delete_topic(name)
        except Exception as exc:  # etcd unreachable
            log.error("deleting topic %s in etcd failed: %s", name, exc)
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT,
                error_message=f"cluster metadata store: {exc}"))
            continue
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_VISIBLE_TIMEOUT_S
        while name in node.model.topics and loop.time() < deadline:
            await asyncio.sleep(0.01)
        results.append(DeleteTopicsResponse.DeletableTopicResult(
            name=name, topic_id=record.topic_id,
            error_code=ErrorCode.NONE if deleted else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


# -- FindCoordinator --------------------------------------------------------------------------

async def find_coordinator(broker: Broker, header: RequestHeader,
                           request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """Every group is coordinated by the leader of ``__consumer_offsets`` (one partition
    in cluster mode), whichever broker is asked, so a group's members never split between
    brokers and a new leader has the replicated offsets."""
    node = _node(broker)
    state = node.model.partition(OFFSETS_TOPIC, 0)
    if state is None:
        try:
            await node.ensure_offsets_topic()
        except Exception as exc:  # etcd unreachable: clients retry
            log.warning("creating %s failed: %s", OFFSETS_TOPIC, exc)
    elif state.leader == node.node_id:
        return await single_node_find_coordinator.handle(broker, header, request)
    coordinator = state.leader if state is not None else None
    info = node.model.brokers.get(coordinator) if coordinator is not None else None
    error = ErrorCode.NONE if info is not None else ErrorCode.COORDINATOR_NOT_AVAILABLE
    node_id, host, port = (info.node_id, info.host, info.port) if info is not None else (-1, "", -1)
    if header.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=node_id, host=host, port=port,
                                                error_code=error, error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=None,
                                   node_id=node_id, host=host, port=port)


# -- InitProducerId ---------------------------------------------------------------------------

def init_producer_id(broker: Broker, header: RequestHeader, request: InitProducerIdRequest) -> (
        InitProducerIdResponse | Awaitable[InitProducerIdResponse]):
    """As on a single node, except that new ids come from cluster-wide blocks, so that
    two brokers never give one id to two producers (their state follows the partition
    from leader to leader through the replicated log)."""
    bump = header.api_version >= 3 and request.producer_id >= 0 \
        and 0 <= request.producer_epoch < single_node_init_producer_id.MAX_EPOCH - 1
    if request.transactional_id is not None or bump:  # no new id involved
        return single_node_init_producer_id.handle(broker, header, request)
    return _new_producer_id(_node(broker))


async def _new_producer_id(node: ClusterNode) -> InitProducerIdResponse:
    try:
        producer_id = await node.allocate_producer_id()
    except Exception as exc:  # etcd unreachable: the client retries
        log.warning("allocating a producer id failed: %s", exc)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=0)


# APIs only the cluster serves (not advertised in ApiVersions: brokers use them among
# themselves, clients skip the validation they would do with them).
EXTRA_HANDLERS: dict[int, Any] = {
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handler("OffsetForLeaderEpoch", 3, 4, offset_for_leader_epoch),
}

HANDLERS: dict[int, Any] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.METADATA: metadata,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.LIST_OFFSETS: list_offsets,
}
