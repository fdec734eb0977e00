"""``__transaction_state``: the coordinator's state records, appended and replayed.

Appends take the storage engine's normal path (validation, rolling, the durability
setting); a state change counts only once its append is as durable as that setting
promises. The topic is compacted (``cleanup.policy=compact``), as Kafka creates it, and
replayed at start-up from its log start: the last value per transactional id wins.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from kafkaproto import ErrorCode
from kafkaproto.records import build_batch
from logserver.internal_topics import TXN_STATE_TOPIC, java_string_hash, kafka_partition_for
from logserver.storage.api import Storage, TopicExistsError
from logserver.storage.replay import replay_partition
from logserver.transactions.metadata import TxnMetadata
from logserver.transactions.records import decode_key, decode_value, encode_key, encode_value

log = logging.getLogger(__name__)

_APPEND_API_VERSION = 9


class HasStorage(Protocol):
    storage: Storage
    config: Any


class StoreError(Exception):
    """A state record could not be written (clients hear COORDINATOR_NOT_AVAILABLE)."""


class TxnStateStore:
    def __init__(self, broker: HasStorage) -> None:
        self._storage = broker.storage
        self._partitions: int = broker.config["transaction.state.log.num.partitions"]
        self._segment_bytes: int = broker.config["transaction.state.log.segment.bytes"]
        self._creating: asyncio.Task[bytes] | None = None
        # Cluster mode: the topic is created through the controller, partitioned as
        # Kafka does, and this tells its partition count (the cluster's, not the local log's).
        self.replicated = False
        self.cluster_partitions: Callable[[], int | None] | None = None

    def exists(self) -> bool:
        return self._storage.partition_count(TXN_STATE_TOPIC) is not None

    @property
    def partitions(self) -> int:
        if self.cluster_partitions is not None:
            return self.cluster_partitions() or self._partitions
        count = self._storage.partition_count(TXN_STATE_TOPIC)
        return self._partitions if count is None else count

    def partition_for(self, transactional_id: str) -> int:
        if self.replicated:  # Kafka's Utils.abs(transactionalId.hashCode) % partitions
            return kafka_partition_for(transactional_id, self.partitions)
        # One node keeps the layout its existing data directories were written with.
        return (java_string_hash(transactional_id) & 0x7FFFFFFF) % self.partitions

    async def ensure_topic(self) -> bool:
        """Create the topic on first use (Kafka does it on the first FindCoordinator)."""
        if self.exists():
            return True
        if self.replicated:  # created through the controller (ClusterNode)
            return False
        if self._creating is None or self._creating.done():
            configs = {"cleanup.policy": "compact", "segment.bytes": str(self._segment_bytes)}
            self._creating = asyncio.get_running_loop().create_task(
                self._storage.create_topic(TXN_STATE_TOPIC, self._partitions, configs))
        try:
            await asyncio.shield(self._creating)
        except TopicExistsError:
            pass
        except Exception as exc:
            log.error("cannot create %s: %s", TXN_STATE_TOPIC, exc)
            return False
        return self.exists()

    async def write(self, meta: TxnMetadata) -> None:
        """Append ``meta``'s record and wait until it is durable; raises StoreError."""
        await self._write(meta.transactional_id, encode_value(meta))

    async def delete(self, transactional_id: str) -> None:
        """Append a tombstone for the id (compaction then drops it)."""
        await self._write(transactional_id, None)

    async def _write(self, transactional_id: str, value: bytes | None) -> None:
        if not await self.ensure_topic():
            raise StoreError(f"{TXN_STATE_TOPIC} cannot be created")
        now = int(time.time() * 1000)
        batch = bytearray(build_batch([(encode_key(transactional_id), value, (), now)]))
        partition = self.partition_for(transactional_id)
        result = self._storage.append(TXN_STATE_TOPIC, partition, memoryview(batch), _APPEND_API_VERSION)
        if result.error != ErrorCode.NONE:
            raise StoreError(f"append to {TXN_STATE_TOPIC}-{partition} failed: "
                             f"{result.message or ErrorCode(result.error).name}")
        if result.wait is not None:
            try:
                await result.wait
            except Exception as exc:
                raise StoreError(f"{TXN_STATE_TOPIC}-{partition} is not durable: {exc}") from exc

    def replay(self) -> dict[str, TxnMetadata]:
        """Every transactional id's last state (a null value deletes it)."""
        states: dict[str, TxnMetadata] = {}
        if not self.exists():
            return states
        for partition in range(self.partitions):
            self._replay_into(states, partition)
        return states

    def replay_partition(self, partition: int) -> dict[str, TxnMetadata]:
        """One partition's ids, read to the local log end: a new leader's log is the
        partition's now, though its high watermark may lag what the old one acknowledged."""
        states: dict[str, TxnMetadata] = {}
        self._replay_into(states, partition, to_log_end=True)
        return states

    def _replay_into(self, states: dict[str, TxnMetadata], partition: int, *,
                     to_log_end: bool = False) -> None:
        for key, value in self._records(partition, to_log_end=to_log_end):
            if key is None:
                continue
            try:
                txn_id = decode_key(key)
                if txn_id is None:
                    continue
                if value is None:
                    states.pop(txn_id, None)
                else:
                    states[txn_id] = decode_value(txn_id, value)
            except (ValueError, struct.error, UnicodeDecodeError) as exc:
                log.error("%s-%d: skipping unreadable record: %s", TXN_STATE_TOPIC, partition, exc)

    def _records(self, partition: int, *,
                 to_log_end: bool = False) -> Iterator[tuple[bytes | None, bytes | None]]:
        for record in replay_partition(self._storage, TXN_STATE_TOPIC, partition,
                                       to_log_end=to_log_end):
            yield record.key, record.value
