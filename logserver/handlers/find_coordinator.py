"""FindCoordinator: this node coordinates every group and every transactional id (key
type 1) (v0-3 one key, v4+ a batch of keys).

The first group lookup creates ``__consumer_offsets``, as Kafka does; while the topic is
being replayed at start-up the answer is COORDINATOR_NOT_AVAILABLE, so clients retry
the lookup instead of sending group requests that would only hear "loading".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import FindCoordinatorRequest, FindCoordinatorResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker

Coordinator = FindCoordinatorResponse.Coordinator
TRANSACTION_KEY_TYPE = 1


async def _lookup(broker: Broker, key_type: int) -> tuple[int, str | None]:
    if key_type == TRANSACTION_KEY_TYPE:  # the transaction coordinator (logserver/transactions)
        return await broker.transactions.find_coordinator()
    return await broker.groups.find_coordinator(key_type)


async def handle(broker: Broker, header: RequestHeader,
           request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = header.api_version
    key_type = request.key_type if version >= 1 else 0
    host, port = broker.advertised_address
    node = broker.node_id
    # DESCRIBE on the group (key type 0) or on the transactional id (1), as Kafka.
    rule = checks.FIND_TXN_COORDINATOR if key_type == TRANSACTION_KEY_TYPE else checks.FIND_GROUP_COORDINATOR
    keys = request.coordinator_keys if version >= 4 else [request.key]
    refused = {key: checks.denied(broker, rule, key) for key in keys}
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            if refused[key]:
                coordinators.append(Coordinator(key=key, node_id=-1, host="", port=-1,
                                                error_code=refused[key], error_message=None))
                continue
            error, message = await _lookup(broker, key_type)
            ok = error == ErrorCode.NONE
            coordinators.append(Coordinator(
                key=key, node_id=node if ok else -1, host=host if ok else "",
                port=port if ok else -1, error_code=error, error_message=message))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    if refused[request.key]:
        error, message = refused[request.key], None
    else:
        error, message = await _lookup(broker, key_type)
    ok = error == ErrorCode.NONE
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=error, error_message=message,
        node_id=node if ok else -1, host=host if ok else "", port=port if ok else -1)
