"""ListTransactions (v0-1): transactional ids filtered by state names, producer ids and
(v1) how long their transaction has been open. Only ids the principal may DESCRIBE are
listed, as in Kafka."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ListTransactionsRequest, ListTransactionsResponse
from logserver.security import checks
from logserver.transactions.metadata import STATE_NAMES

if TYPE_CHECKING:
    from logserver.services import BrokerServices

State = ListTransactionsResponse.TransactionState
_BY_NAME = {name: state for state, name in STATE_NAMES.items()}


def handle(broker: BrokerServices, header: RequestHeader,
           request: ListTransactionsRequest) -> ListTransactionsResponse:
    coordinator = broker.transactions
    unknown = [name for name in request.state_filters if name not in _BY_NAME]
    if coordinator.loading:
        return ListTransactionsResponse(throttle_time_ms=0,
                                        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                        unknown_state_filters=unknown, transaction_states=[])
    wanted_states = {_BY_NAME[n] for n in request.state_filters if n in _BY_NAME}
    wanted_ids = set(request.producer_id_filters)
    duration = request.duration_filter if header.api_version >= 1 else -1
    now = int(time.time() * 1000)
    states = []
    for meta in coordinator.all_transactions():
        if wanted_states and meta.state not in wanted_states:
            continue
        if wanted_ids and meta.producer_id not in wanted_ids:
            continue
        if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < duration):
            continue
        if not checks.allowed(broker, checks.LIST_TRANSACTIONS, meta.transactional_id):
            continue
        states.append(State(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                            transaction_state=STATE_NAMES[meta.state]))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    unknown_state_filters=unknown, transaction_states=states)
