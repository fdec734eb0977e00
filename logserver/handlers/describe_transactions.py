"""DescribeTransactions (v0): state, producer, timeout and partitions of transactional ids.

As in Kafka, each id needs DESCRIBE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and
the answer lists only the partitions of topics the principal may DESCRIBE: the others are
left out without an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from logserver.security import checks
from logserver.transactions.metadata import STATE_NAMES

if TYPE_CHECKING:
    from logserver.services import BrokerServices

State = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = broker.transactions
    states = []
    for txn_id in request.transactional_ids:
        refused = checks.denied(broker, checks.DESCRIBE_TRANSACTIONS, txn_id)
        # Cluster mode: NOT_COORDINATOR unless this broker leads the id's partition.
        unavailable = refused or coordinator.status(txn_id)
        meta = None if unavailable else coordinator.describe(txn_id)
        if meta is None:
            error = unavailable or ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            states.append(State(error_code=error, transactional_id=txn_id, transaction_state="",
                                transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        by_topic = {topic: partitions for topic, partitions in by_topic.items()
                    if checks.allowed(broker, checks.DESCRIBE_TRANSACTIONS_TOPIC, topic)}
        states.append(State(
            error_code=ErrorCode.NONE, transactional_id=txn_id,
            transaction_state=STATE_NAMES[meta.state], transaction_timeout_ms=meta.timeout_ms,
            transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
