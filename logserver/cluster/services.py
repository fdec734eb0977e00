"""FindCoordinator: a cluster-wide answer (a group's coordinator is the leader of its
``__consumer_offsets`` partition). InitProducerId is the single-node handler; its new ids
come from blocks reserved in etcd (``Broker.allocate_producer_id``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from logserver.cluster.routing import node_of
from logserver.groups import OFFSETS_TOPIC
from logserver.groups.coordinator import GROUP_KEY_TYPE
from logserver.groups.store import kafka_partition_for
from logserver.handlers.find_coordinator import TRANSACTION_KEY_TYPE
from logserver.request_context import listener_name
from logserver.security import checks
from logserver.transactions.store import TXN_STATE_TOPIC

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode


log = logging.getLogger(__name__)


# -- FindCoordinator --------------------------------------------------------------------------

async def find_coordinator(broker: Broker, header: RequestHeader,
                           request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """A group is coordinated by the leader of its ``__consumer_offsets`` partition,
    Kafka's ``Utils.abs(groupId.hashCode) % partitions``, whichever broker is asked: its
    members never split between brokers, and a new leader of that partition has the
    group's replicated offsets. A transactional id (key type 1) likewise goes to the
    leader of its ``__transaction_state`` partition, which has its replicated state."""
    node = node_of(broker)
    key_type = request.key_type if header.api_version >= 1 else 0
    internal = TXN_STATE_TOPIC if key_type == TRANSACTION_KEY_TYPE else OFFSETS_TOPIC
    if internal not in node.model.topics:
        try:
            if key_type == TRANSACTION_KEY_TYPE:
                await node.ensure_txn_state_topic()
            else:
                await node.ensure_offsets_topic()
        except Exception as exc:  # etcd unreachable: clients retry
            log.warning("creating %s failed: %s", internal, exc)
    rule = checks.FIND_TXN_COORDINATOR if key_type == TRANSACTION_KEY_TYPE \
        else checks.FIND_GROUP_COORDINATOR
    keys = request.coordinator_keys if header.api_version >= 4 else [request.key]
    answers = [_coordinator_of(node, key, key_type, checks.denied(broker, rule, key))
               for key in keys]
    if header.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=node_id, host=host, port=port,
                                                error_code=error, error_message=None)
            for key, (error, node_id, host, port) in zip(keys, answers, strict=True)])
    error, node_id, host, port = answers[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=None,
                                   node_id=node_id, host=host, port=port)


def _coordinator_of(node: ClusterNode, key: str, key_type: int,
                    refused: int) -> tuple[int, int, str, int]:
    """(error, node id, host, port) of one key's coordinator."""
    if refused:
        return refused, -1, "", -1
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    internal = TXN_STATE_TOPIC if key_type == TRANSACTION_KEY_TYPE else OFFSETS_TOPIC
    record = node.model.topics.get(internal)
    partition = 0 if record is None else kafka_partition_for(key, record.partitions)
    state = node.model.partition(internal, partition)
    info = node.model.brokers.get(state.leader) if state is not None else None
    if info is None:  # not created yet, or no leader now: clients look again
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    host, port = info.address(listener_name.get())  # the listener the client came in on
    return ErrorCode.NONE, info.node_id, host, port
