"""Transactions (KIP-98): the transaction coordinator and its state topic.

- ``metadata``: one transactional id's state (Kafka's TransactionMetadata).
- ``machine``: the coordinator's decisions, no I/O (InitProducerId, AddPartitionsToTxn,
  AddOffsetsToTxn, TxnOffsetCommit, EndTxn, timeouts, recovery).
- ``records``: the key/value schema of ``__transaction_state``.
- ``store``: appends to and replay of ``__transaction_state``.
- ``coordinator``: the glue: per-id locks, durable state writes, markers, the timeout sweep.

The partition side: open transactions and the last stable offset are producer state
(``logserver.log.producer_state``), aborted transactions are each segment's ``.txnindex``
(``logserver.log.transaction_index``); markers are built by ``kafkaproto.control``.
"""

from logserver.internal_topics import TXN_STATE_TOPIC
from logserver.transactions.coordinator import TransactionCoordinator

__all__ = ["TXN_STATE_TOPIC", "TransactionCoordinator"]
