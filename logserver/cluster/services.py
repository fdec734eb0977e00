"""FindCoordinator: a cluster-wide answer (the group coordinator is the leader of
``__consumer_offsets``). InitProducerId is the single-node handler; its new ids come
from blocks reserved in etcd (``Broker.allocate_producer_id``)."""

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
from logserver.handlers import find_coordinator as single_node_find_coordinator
from logserver.request_context import listener_name

if TYPE_CHECKING:
    from logserver.broker import Broker


log = logging.getLogger(__name__)


# -- FindCoordinator --------------------------------------------------------------------------

async def find_coordinator(broker: Broker, header: RequestHeader,
                           request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """Every group is coordinated by the leader of ``__consumer_offsets`` (one partition
    in cluster mode), whichever broker is asked, so a group's members never split between
    brokers and a new leader has the replicated offsets."""
    node = node_of(broker)
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
    node_id, (host, port) = (info.node_id, info.address(listener_name.get())) if info is not None \
        else (-1, ("", -1))
    if header.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=node_id, host=host, port=port,
                                                error_code=error, error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=None,
                                   node_id=node_id, host=host, port=port)
