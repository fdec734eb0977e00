"""The transaction coordinator: the glue that carries out ``machine.py``'s steps.

Every request for one transactional id runs under that id's lock, so steps never
interleave. A step's prepare record is durable in ``__transaction_state`` before any
marker is written; markers go to every partition of the transaction through the storage
engine (Kafka's WriteTxnMarkers, done in-process since this node leads every partition),
the groups' ``__consumer_offsets`` partitions included: their marker completes the
TxnOffsetCommit offsets the group coordinator holds (``groups/txn_offsets.py``), and the
complete record follows. The client's EndTxn is answered once all of that is done (Kafka answers after
the prepare record and makes the next request wait with CONCURRENT_TRANSACTIONS).

Start-up replays ``__transaction_state``; transactions found prepared are completed
before anything is served; transactions found ongoing stay open for their producer, and
the timeout sweep aborts them if it never comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kafkaproto import ErrorCode
from logserver.clock import SYSTEM_CLOCK, Clock
from logserver.coordinator_partitions import CoordinatorPartitions
from logserver.groups.group import CommittedOffset
from logserver.internal_topics import OFFSETS_TOPIC
from logserver.transactions.machine import Markers, Step, TxnMachine
from logserver.transactions.metadata import TopicPartition, TxnMetadata, TxnState
from logserver.transactions.store import TXN_STATE_TOPIC, StoreError, TxnStateStore

if TYPE_CHECKING:
    from logserver.groups.coordinator import GroupCoordinator
    from logserver.storage.api import Storage

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0  # one node, never re-elected (cluster: the partition's leader epoch)


class TxnHost(Protocol):
    """What the transaction coordinator needs of its broker: settings and storage (for
    ``__transaction_state``), the group coordinator (TxnOffsetCommit, markers on
    ``__consumer_offsets``) and producer ids."""

    config: Any
    storage: Storage
    groups: GroupCoordinator

    async def allocate_producer_id(self) -> int: ...


class TransactionCoordinator:
    def __init__(self, broker: TxnHost, clock: Clock = SYSTEM_CLOCK) -> None:
        self._broker = broker
        self._clock = clock
        self.store = TxnStateStore(broker)
        self.machine = TxnMachine(broker.config["transaction.max.timeout.ms"])
        self._sweep_ms: int = broker.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._id_expiration_ms: int = broker.config["transactional.id.expiration.ms"]
        self.transactions: dict[str, TxnMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.loading = True
        self.active = False
        self._tasks: list[asyncio.Task[None]] = []
        # Cluster mode (logserver.cluster.txn_markers): markers go to each partition's
        # leader as WriteTxnMarkers; None: written here, this node leads every partition.
        self.marker_sender: Callable[[Markers, list[TopicPartition], int], Awaitable[None]] | None = None
        # Cluster mode: the __transaction_state partitions this broker leads and has
        # loaded (None: single node, every id is ours), and those being loaded.
        self.partitions = CoordinatorPartitions()
        # The completion of the transactions a load found prepared, by partition: kept,
        # so that unloading the partition or closing cancels it (never left pending).
        self._completions: dict[int, asyncio.Task[None]] = {}
        # Kafka's coordinator epoch: the leader epoch of the id's partition here, stamped
        # on the markers this coordinator writes.
        self._epochs: dict[int, int] = {}

    @property
    def owned(self) -> set[int] | None:
        return self.partitions.owned

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.active = True
        self._tasks = [loop.create_task(self._load()), loop.create_task(self._sweep())]

    def start_partitioned(self) -> None:
        """Cluster mode: serve no transactional id until this broker leads its
        ``__transaction_state`` partition (``load_partition``); others get NOT_COORDINATOR."""
        loop = asyncio.get_running_loop()
        self.partitions.start_partitioned()
        self.store.replicated = True
        self.active = True
        self.loading = False
        self._tasks = [loop.create_task(self._sweep())]

    def load_partition(self, partition: int, coordinator_epoch: int = COORDINATOR_EPOCH) -> None:
        """This broker leads ``partition`` now: replay it from the local replica to its
        log end (COORDINATOR_LOAD_IN_PROGRESS meanwhile), then complete the transactions
        found prepared, as Kafka's new coordinator does."""
        if self.owned is not None:
            self._epochs[partition] = coordinator_epoch
        if self.active:
            self.partitions.begin_load(partition, self._load_partition)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads ``partition`` now: forget its ids (NOT_COORDINATOR)."""
        if self.owned is None:
            return
        self._epochs.pop(partition, None)
        served, _loading = self.partitions.drop(partition)
        completing = self._completions.pop(partition, None)
        if completing is not None:
            completing.cancel()
        if not served:
            return
        gone = [t for t in self.transactions if self.store.partition_for(t) == partition]
        for txn_id in gone:
            self.transactions.pop(txn_id, None)
        log.info("%s-%d: unloaded %d transactional ids (no longer its leader)", TXN_STATE_TOPIC,
                 partition, len(gone))

    async def _load_partition(self, partition: int) -> None:
        started = self._clock.monotonic()
        loaded: dict[str, TxnMetadata] = {}
        try:
            loaded = self.store.replay_partition(partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("replaying %s-%d failed", TXN_STATE_TOPIC, partition)
        if not self.partitions.still_loading(partition):
            return  # unloaded meanwhile
        self.transactions.update(loaded)
        self.partitions.loaded(partition)
        log.info("%s-%d: loaded %d transactional ids in %.3f s", TXN_STATE_TOPIC, partition,
                 len(loaded), self._clock.monotonic() - started)
        prepared = [meta.transactional_id for meta in loaded.values() if meta.in_prepare]
        if prepared:
            self._completions[partition] = asyncio.get_running_loop().create_task(
                self._complete_prepared(partition, prepared))

    async def _complete_prepared(self, partition: int, txn_ids: list[str]) -> None:
        """Complete what the last coordinator left prepared, as Kafka's new coordinator
        does once the partition is loaded."""
        try:
            for txn_id in txn_ids:
                log.info("completing transaction %s left prepared by the last coordinator", txn_id)
                await self._retry_completion(txn_id)
        finally:
            if self._completions.get(partition) is asyncio.current_task():
                del self._completions[partition]

    async def close(self) -> None:
        self.active = False
        tasks = [*self.partitions.cancel_loads(), *self._completions.values(), *self._tasks]
        self._completions.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:  # awaited: none is left pending when the loop closes
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _load(self) -> None:
        started = self._clock.monotonic()
        try:
            self.transactions = self.store.replay()
            # a prepared transaction's marker completes offsets at the group coordinator,
            # which must have replayed __consumer_offsets first
            await self._broker.groups.loaded.wait()
            for meta in list(self.transactions.values()):
                step = self.machine.recover(meta, self._clock.wall_ms())
                if step is not None:
                    log.info("completing transaction %s left %s by the last run",
                             meta.transactional_id, meta.state.name)
                    await self._apply(meta.transactional_id, step)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s failed; serving what was loaded", TXN_STATE_TOPIC)
        self.loading = False
        log.info("loaded %d transactional ids from %s in %.3f s", len(self.transactions),
                 TXN_STATE_TOPIC, self._clock.monotonic() - started)

    async def _sweep(self) -> None:
        """Abort transactions open longer than their transaction.timeout.ms."""
        while True:
            await asyncio.sleep(self._sweep_ms / 1000)
            if self.loading:
                continue
            try:
                await self._sweep_once()
            except Exception:  # a bug here must not stop future sweeps
                log.exception("transaction sweep failed")

    async def _sweep_once(self) -> None:
        for txn_id, meta in list(self.transactions.items()):
            now = self._clock.wall_ms()
            if self.owned is not None and not self.serves(txn_id):
                continue  # its partition moved away (or is loading) meanwhile
            if meta.in_prepare:  # markers that failed to be written: try again
                await self._retry_completion(txn_id)
            elif self.machine.id_expired(meta, now, self._id_expiration_ms):
                await self._forget(txn_id)
            elif self.machine.expire(meta, now) is not None:
                await self._abort_timed_out(txn_id)

    async def _abort_timed_out(self, txn_id: str) -> None:
        async with self._lock(txn_id):
            current = self.transactions.get(txn_id)
            step = None if current is None else self.machine.expire(current, self._clock.wall_ms())
            if current is None or step is None:
                return
            log.info("aborting transaction %s: open longer than %d ms", txn_id, current.timeout_ms)
            try:
                await self._apply(txn_id, step)
            except Exception:
                log.exception("aborting timed-out transaction %s failed", txn_id)

    async def _retry_completion(self, txn_id: str) -> None:
        async with self._lock(txn_id):
            meta = self.transactions.get(txn_id)
            step = None if meta is None else self.machine.recover(meta, self._clock.wall_ms())
            if step is None:
                return
            try:
                await self._apply(txn_id, step)
            except Exception:
                log.exception("completing transaction %s failed; retrying", txn_id)

    async def _forget(self, txn_id: str) -> None:
        async with self._lock(txn_id):
            meta = self.transactions.get(txn_id)
            if meta is None or not self.machine.id_expired(meta, self._clock.wall_ms(), self._id_expiration_ms):
                return
            try:
                self._check_owned(txn_id)
                await self.store.delete(txn_id)
            except StoreError as exc:
                log.error("expiring transactional id %s: %s", txn_id, exc)
                return
            self.transactions.pop(txn_id, None)
            log.info("transactional id %s expired (idle longer than %d ms)", txn_id,
                     self._id_expiration_ms)

    # -- the glue -----------------------------------------------------------------------

    def _lock(self, txn_id: str) -> asyncio.Lock:
        lock = self._locks.get(txn_id)
        if lock is None:
            lock = self._locks[txn_id] = asyncio.Lock()
        return lock

    def _status(self, txn_id: str | None = None) -> int | None:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if txn_id is not None:
            return self.partitions.error(self.store.partition_for(txn_id))
        return None

    def status(self, txn_id: str) -> int | None:
        """Why ``txn_id`` cannot be served here (NOT_COORDINATOR, loading...), or None."""
        return self._status(txn_id)

    def serves(self, txn_id: str) -> bool:
        """Is ``txn_id``'s state loaded here (its partition led by this broker)?"""
        return self._status(txn_id) is None

    def _check_owned(self, txn_id: str) -> None:
        """Cluster mode: write nothing to a partition this broker no longer leads (its
        local log is a follower's now). Checked with no await before the append."""
        if self.owned is not None and self.store.partition_for(txn_id) not in self.owned:
            raise StoreError(f"no longer the coordinator of {txn_id}")

    async def _apply(self, txn_id: str, step: Step) -> None:
        if step.prepare is not None:
            self._check_owned(txn_id)
            await self.store.write(step.prepare)
            self.transactions[txn_id] = step.prepare
        if step.markers is not None:
            await self._write_markers(step.markers, self._coordinator_epoch(txn_id))
        if step.complete is not None:
            self._check_owned(txn_id)
            await self.store.write(step.complete)
            self.transactions[txn_id] = step.complete

    def _coordinator_epoch(self, txn_id: str) -> int:
        """The epoch stamped on ``txn_id``'s markers: the leader epoch of its partition
        here (cluster mode; StoreError once another broker leads it), else 0."""
        if self.owned is None:
            return COORDINATOR_EPOCH
        epoch = self._epochs.get(self.store.partition_for(txn_id))
        if epoch is None:
            raise StoreError(f"no longer the coordinator of {txn_id}")
        return epoch

    async def _write_markers(self, markers: Markers, coordinator_epoch: int) -> None:
        storage = self._broker.storage
        groups = self._broker.groups
        waits = []
        # Every partition of the transaction, the groups' __consumer_offsets partitions
        # too: their marker is what makes a TxnOffsetCommit's offsets visible (or drops
        # them) at the group coordinator.
        partitions = [tp for tp in sorted(markers.partitions) if tp[0] != TXN_STATE_TOPIC]
        if self.marker_sender is not None:  # cluster mode: to each partition's leader
            await self.marker_sender(markers, partitions, coordinator_epoch)
            partitions = []
        offsets_partitions = [p for t, p in partitions if t == OFFSETS_TOPIC]
        for partition in offsets_partitions:  # the group coordinator must be ready for it
            refused = groups.marker_status(partition)
            if refused is not None:
                raise StoreError(f"marker for {OFFSETS_TOPIC}-{partition}: "
                                 f"{ErrorCode(refused).name}")
        for topic, partition in partitions:
            result = storage.write_txn_marker(topic, partition, markers.producer_id,
                                              markers.producer_epoch, commit=markers.commit,
                                              coordinator_epoch=coordinator_epoch)
            if result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                log.info("no marker for deleted partition %s-%d", topic, partition)
            elif result.error != ErrorCode.NONE:
                raise StoreError(f"marker for {topic}-{partition}: {result.message}")
            elif result.wait is not None:
                waits.append(result.wait)
        if waits:
            await asyncio.gather(*waits)
        for partition in offsets_partitions:
            groups.complete_txn(partition, markers.producer_id, commit=markers.commit)
        now = self._clock.wall_ms()
        for group, offsets in markers.offsets.items():
            if not offsets:
                continue
            committed = {tp: CommittedOffset(offset, leader_epoch, metadata, now, -1)
                         for tp, (offset, leader_epoch, metadata) in offsets.items()}
            errors = await self._broker.groups.commit_txn_offsets(group, committed)
            failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
            if failed:
                raise StoreError(f"offsets of group {group} not stored: {failed}")

    async def _run(self, txn_id: str, decide: Callable[[TxnMetadata | None], Step]) -> Step:
        """Decide under the id's lock and carry the step out; errors become codes."""
        async with self._lock(txn_id):
            error = self._status(txn_id)  # unloaded while waiting for the lock
            if error is not None:
                return Step(error=error)
            step = decide(self.transactions.get(txn_id))
            if step.error != ErrorCode.NONE:
                return step
            try:
                await self._apply(txn_id, step)
            except StoreError as exc:
                log.error("transaction %s: %s", txn_id, exc)
                return Step(error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return step

    # -- requests -------------------------------------------------------------------------

    async def find_coordinator(self) -> tuple[int, str | None]:
        error = self._status()
        if error is not None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is loading"
        if not await self.store.ensure_topic():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {TXN_STATE_TOPIC}"
        return ErrorCode.NONE, None

    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int, int]:
        """(error, producer id, epoch)."""
        error = self._status(txn_id)
        if error is not None:
            return error, -1, -1
        async with self._lock(txn_id):
            meta = self.transactions.get(txn_id)
            new_id = None
            if self.machine.needs_new_producer_id(meta):
                new_id = await self._broker.allocate_producer_id()
            step = self.machine.init_producer(
                meta, transactional_id=txn_id, timeout_ms=timeout_ms, producer_id=producer_id,
                producer_epoch=producer_epoch, new_producer_id=new_id, now=self._clock.wall_ms())
            if step.error != ErrorCode.NONE:
                return step.error, -1, -1
            try:
                await self._apply(txn_id, step)
            except StoreError as exc:
                log.error("transaction %s: %s", txn_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
        return ErrorCode.NONE, step.producer_id, step.producer_epoch

    async def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[TopicPartition]) -> int:
        error = self._status(txn_id)
        if error is not None:
            return error
        step = await self._run(txn_id, lambda meta: self.machine.add_partitions(
            meta, producer_id, producer_epoch, partitions, self._clock.wall_ms()))
        return step.error

    async def add_offsets(self, txn_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> int:
        error = self._status(txn_id)
        if error is not None:
            return error
        offsets_partition = (OFFSETS_TOPIC, self._broker.groups.store.partition_for(group_id))
        step = await self._run(txn_id, lambda meta: self.machine.add_partitions(
            meta, producer_id, producer_epoch, {offsets_partition}, self._clock.wall_ms(), group=group_id))
        return step.error

    async def check_txn_offset_commit(self, txn_id: str, producer_id: int, producer_epoch: int,
                                      group_id: str) -> int:
        """TxnOffsetCommit's transaction check, where this node coordinates ``txn_id``: its
        open transaction took the group in (AddOffsetsToTxn) and the producer is current.
        In a cluster whose transaction coordinator for the id is another broker, nothing
        is asked of it (as Kafka's group coordinator before KIP-890): the offsets
        partition fences an older producer epoch, and only the transaction's own marker
        ever makes the offsets visible."""
        if self.owned is not None and self.active and not self.serves(txn_id):
            return ErrorCode.NONE
        error = self._status(txn_id)
        if error is not None:
            return error
        async with self._lock(txn_id):
            return self.machine.txn_offset_commit(
                self.transactions.get(txn_id), producer_id, producer_epoch, group_id).error

    async def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> int:
        error = self._status(txn_id)
        if error is not None:
            return error
        step = await self._run(txn_id, lambda meta: self.machine.end_txn(
            meta, producer_id, producer_epoch, commit, self._clock.wall_ms()))
        return step.error

    def check_produce(self, txn_id: str, producer_id: int, producer_epoch: int,
                      topic: str, partition: int) -> int:
        if self.loading or not self.active:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # retriable: the producer tries again
        return self.machine.check_produce(self.transactions.get(txn_id), producer_id,
                                          producer_epoch, (topic, partition))

    def pending_offset_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions whose offsets for ``group_id`` wait in an open transaction recorded
        by an older version of this server, which kept them in the transaction's state."""
        pending: set[TopicPartition] = set()
        for meta in self.transactions.values():
            if meta.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT):
                pending.update(meta.pending_offsets.get(group_id, ()))
        return pending

    def describe(self, txn_id: str) -> TxnMetadata | None:
        meta = self.transactions.get(txn_id)
        return None if meta is None else meta.copy()

    def all_transactions(self) -> list[TxnMetadata]:
        return [m.copy() for m in self.transactions.values()]
