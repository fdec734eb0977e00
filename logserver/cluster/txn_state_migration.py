"""A broker's local ``__transaction_state`` written before the topic was replicated.

Until issue 12's replicated ``__transaction_state``, a cluster broker coordinating
transactions (then the leader of ``__consumer_offsets-0``) kept them in a local,
unreplicated ``__transaction_state`` of ``transaction.state.log.num.partitions``
partitions (1 unless set), placing an id by ``(hashCode & 0x7fffffff) % partitions``.
Used as a replica of the replicated topic, such a copy would mix its records into the
cluster's partitions (ids in partitions that are not theirs), or be truncated away by a
leader without them.

So at start-up, before it holds any replica, a broker checks its local copy: it predates
replication when etcd has no ``__transaction_state`` yet (a broker creates its local copy
only from etcd's record now), when the partition counts differ, or when a partition holds
an id that Kafka's placement puts elsewhere. Such a copy holding open transactions
(ongoing or prepared) refuses the start, naming them: their markers were never written,
so their partitions would keep the transactions hanging. Without open transactions the
copy only remembers finished ones; it is moved aside into ``MOVED_DIR`` (not deleted)
and the broker starts, its coordinators knowing none of those ids (a producer that was
running initialises its transactions again).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from logserver.internal_topics import TXN_STATE_TOPIC, kafka_partition_for
from logserver.transactions.metadata import TxnMetadata, TxnState

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

MOVED_DIR = "transaction-state-before-replication"
OPEN = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                  TxnState.PREPARE_EPOCH_FENCE})


class PreReplicationTxnStateError(Exception):
    """The local ``__transaction_state`` predates replication and has open transactions."""


def _local_states(broker: BrokerServices, local: int) -> tuple[dict[str, TxnMetadata], bool]:
    """Every id's last state in the local copy, and whether one sits in a partition
    other than Kafka's placement with ``local`` partitions."""
    states: dict[str, TxnMetadata] = {}
    misplaced = False
    for partition in range(local):
        found = broker.transactions.store.replay_partition(partition)
        misplaced |= any(kafka_partition_for(txn_id, local) != partition for txn_id in found)
        states.update(found)
    return states, misplaced


async def check_local_txn_state(broker: BrokerServices, cluster_partitions: int | None) -> None:
    """Move a pre-replication local ``__transaction_state`` aside, or refuse the start
    (PreReplicationTxnStateError) when it holds open transactions. ``cluster_partitions``:
    the partition count in etcd's record, None when etcd has none."""
    storage = broker.storage
    local = storage.partition_count(TXN_STATE_TOPIC)
    if local is None:
        return
    states, misplaced = _local_states(broker, local)
    if cluster_partitions == local and not misplaced:
        return  # a replica of the replicated topic
    data_dir = Path(broker.config.data_dir)
    open_ids = sorted(t for t, meta in states.items() if meta.state in OPEN)
    if open_ids:
        shown = ", ".join(open_ids[:5]) + (f" and {len(open_ids) - 5} more" if len(open_ids) > 5 else "")
        raise PreReplicationTxnStateError(
            f"{data_dir}/{TXN_STATE_TOPIC}-* was written before {TXN_STATE_TOPIC} was "
            f"replicated and holds {len(open_ids)} open transaction(s) ({shown}): start this "
            f"data directory with the previous version, let them end (or abort them: "
            f"kafka-transactions.sh abort), stop it, then start this version")
    moved = data_dir / MOVED_DIR / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved.mkdir(parents=True, exist_ok=True)
    for partition in range(local):
        source = data_dir / f"{TXN_STATE_TOPIC}-{partition}"
        if source.is_dir():
            shutil.copytree(source, moved / source.name)
    await storage.delete_topic(TXN_STATE_TOPIC)
    log.warning("%s: the local %s (%d partitions, %d transactional ids, none open) was "
                "written before it was replicated; moved to %s, the cluster's replicated "
                "topic replaces it", data_dir, TXN_STATE_TOPIC, local, len(states), moved)
