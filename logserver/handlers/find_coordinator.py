"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id
(key type 1) (v0-3 one key, v4+ a batch of keys), as the control plane answers it: this
node on a single node, the leader of the key's ``__consumer_offsets`` /
``__transaction_state`` partition in a cluster.

The first lookup creates the internal topic, as Kafka does; while it is being replayed
(or has no leader) the answer is COORDINATOR_NOT_AVAILABLE, so clients retry the lookup
instead of sending group requests that would only hear "loading". As Kafka: DESCRIBE on
the group or on the transactional id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import FindCoordinatorRequest, FindCoordinatorResponse
from logserver.control.api import Coordinator as Found
from logserver.internal_topics import TRANSACTION_KEY_TYPE
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

__all__ = ["TRANSACTION_KEY_TYPE", "handle"]

Coordinator = FindCoordinatorResponse.Coordinator


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = header.api_version
    key_type = request.key_type if version >= 1 else 0
    rule = checks.FIND_TXN_COORDINATOR if key_type == TRANSACTION_KEY_TYPE else checks.FIND_GROUP_COORDINATOR
    keys = request.coordinator_keys if version >= 4 else [request.key]
    refused = {key: checks.denied(broker, rule, key) for key in keys}  # decided now
    found = []
    for key in keys:
        found.append(Found(refused[key], None, None) if refused[key]
                     else await broker.control.find_coordinator(key_type, key))
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=f.address.node_id if f.address else -1,
                        host=f.address.host if f.address else "",
                        port=f.address.port if f.address else -1,
                        error_code=f.error, error_message=f.message)
            for key, f in zip(keys, found, strict=True)])
    f = found[0]
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=f.error, error_message=f.message,
        node_id=f.address.node_id if f.address else -1, host=f.address.host if f.address else "",
        port=f.address.port if f.address else -1)
