"""The boundary between request handlers / group coordinator and a storage engine.

Handlers and the coordinator see topics and partitions only through ``Storage``, the
client-facing interface; what only a follower replica does to a log (append its
leader's batches at their offsets, truncate, restart, take the replicated high
watermark and leader epoch) is ``ReplicaLog``, which only cluster replication
(logserver/cluster) reaches, through ``Broker.engine``. An engine (the segment log in
``segment_log``, the in-memory one in ``memory``) implements both: ``StorageEngine``. Reads of topic state and the hot path (append, read, list offsets) are plain calls
on the event-loop thread; anything that touches the disk in bulk (creating or deleting a
topic, adding partitions, flushing, deleting records, reserving producer ids) is a
coroutine whose slow part runs on the storage worker thread. A topic becomes visible to
every method only once it exists completely, and a failed creation leaves nothing.

Errors: topic-level operations raise the exceptions below; per-partition operations
return Kafka error codes (no exception on the hot path).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from commonlib.latency import LatencyHistogram
from kafkaproto import FileRegion
from logserver.broker_overrides import BrokerOverrides
from logserver.log.errors import InvalidTopicError, TopicExistsError, UnknownTopicOrPartitionError
from logserver.topic_config import InvalidConfigError, TopicConfig

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "AppendResult",
    "DeletedRecords",
    "LogDirInfo",
    "PartitionDirInfo",
    "InvalidConfigError",
    "InvalidTopicError",
    "ListedOffset",
    "PartitionStats",
    "ReadResult",
    "Records",
    "ReplicaLog",
    "Storage",
    "StorageEngine",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]

# ListOffsets timestamps with a special meaning (Kafka's ListOffsetsRequest constants).
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

# What a read hands to the network layer: a file slice to sendfile, or bytes.
Records = FileRegion | bytes


@dataclass(slots=True)
class AppendResult:
    error: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    #: INVALID_RECORD's records at fault, (index in the batch, message): Produce v8+
    #: record_errors (KIP-467)
    record_errors: tuple[tuple[int, str], ...] = ()
    wait: Awaitable[None] | None = None  # what the acknowledgement must wait for
    # Set when the batch is validated off the event loop: the real result, once appended
    # (the fields above are then placeholders).
    deferred: Awaitable[AppendResult] | None = None


class ReadResult(NamedTuple):
    error: int
    records: Records
    size: int  # bytes of records
    high_watermark: int  # -1 for an unknown partition
    log_start_offset: int


class ListedOffset(NamedTuple):
    error: int
    offset: int  # -1 when no record qualifies
    timestamp: int


class DeletedRecords(NamedTuple):
    error: int
    low_watermark: int  # the log start offset after the call; -1 on error


class PartitionDirInfo(NamedTuple):
    topic: str
    partition: int
    size: int  # bytes of its segments
    offset_lag: int  # 0: the only replica is the current one (Kafka: lag of a future replica)


class LogDirInfo(NamedTuple):
    path: str
    total_bytes: int  # of the file system; -1 when unknown (the in-memory engine)
    usable_bytes: int
    partitions: list[PartitionDirInfo]
class PartitionStats(NamedTuple):
    """One partition as the admin API and /metrics show it (in-memory state only)."""

    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    segment_count: int
    size_bytes: int  # of its segment files
    bytes_in: int  # appended batch bytes since start-up
    messages_in: int  # appended records since start-up
    bytes_out: int  # record bytes handed to fetchers since start-up
    waiting_fetches: int  # long-poll fetches parked on it now


class Storage(Protocol):
    """What handlers and the group coordinator may ask of a storage engine (the
    client-facing interface)."""

    # -- lifecycle (the broker, the composition root, calls these) ------------------------

    def open(self) -> None:
        """Load (and recover) what is stored; before the server serves anything."""
        ...

    async def start(self) -> None:
        """Start background work (durability timer, retention)."""
        ...

    async def close(self) -> None:
        """Finish pending work and close cleanly."""
        ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def durability_mode(self) -> str: ...

    # -- topics ---------------------------------------------------------------------------

    def topic_names(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int | None:
        """None when the topic does not exist (or is still being created)."""
        ...

    def topic_id(self, topic: str) -> bytes | None: ...

    def topic_for_id(self, topic_id: bytes) -> str | None: ...

    def topic_config(self, topic: str) -> TopicConfig | None:
        """The resolved configuration (broker defaults plus the topic's overrides)."""
        ...

    def topic_overrides(self, topic: str) -> Mapping[str, str] | None:
        """The overrides that apply (stored keys the server refuses are left out)."""
        ...

    async def create_topic(self, name: str, partitions: int, overrides: Mapping[str, str]) -> bytes:
        """Create a topic all-or-nothing; returns its id. Raises TopicExistsError (also for
        the loser of two concurrent creations), InvalidTopicError, InvalidConfigError, OSError."""
        ...

    async def delete_topic(self, name: str) -> bytes:
        """Delete a topic; returns its id. It is invisible from the call on."""
        ...

    async def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions (never shrinks)."""
        ...

    async def alter_topic_config(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace a topic's overrides (the whole set; AlterConfigs / IncrementalAlterConfigs
        compute it): validated, persisted, and applied to every partition at once.
        Raises UnknownTopicOrPartitionError, InvalidConfigError, OSError."""
        ...

    def broker_overrides(self) -> BrokerOverrides:
        """The dynamic broker configs in force."""
        ...

    async def alter_broker_overrides(self, overrides: BrokerOverrides) -> None:
        """Replace the dynamic broker configs (validated with
        ``broker_overrides.validate_broker_overrides``): persisted, then every topic's
        inherited settings change at once."""
        ...

    async def delete_records(self, topic: str, partition: int, offset: int) -> DeletedRecords:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high
        watermark) and drop the segments below it; persisted before it returns.
        OFFSET_OUT_OF_RANGE above the high watermark or for a negative offset other than
        -1, UNKNOWN_TOPIC_OR_PARTITION; a move down is a no-op."""
        ...

    def log_dirs(self) -> list[LogDirInfo]:
        """DescribeLogDirs: each log directory and the size of every partition in it."""
        ...

    # -- partitions (hot path) ------------------------------------------------------------

    def append(self, topic: str, partition: int, records: memoryview | None,
               produce_version: int, *, defer_io: bool = False) -> AppendResult:
        """Validate one produce batch and append it (idempotence checked); ``wait`` is what
        the acknowledgement must wait for under the durability setting. ``defer_io``: a
        caller that awaits ``deferred`` lets a partition's first append make its files on
        a thread (the Produce handler when a response is awaited)."""
        ...

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             min_one: bool, fetch_version: int, upper_bound: int | None = None,
             replica: bool = False) -> ReadResult:
        """Whole batches from the one holding ``offset`` (KIP-74 with ``min_one``), none
        at or past ``upper_bound`` (the last stable offset of a read_committed fetch);
        below the high watermark, except for a follower replica (``replica``)."""
        ...

    # -- transactions (logserver/transactions) --------------------------------------------

    def last_stable_offset(self, topic: str, partition: int, *,
                           fetch_offset: int | None = None) -> int | None:
        """The first offset of the oldest open transaction, or the high watermark (open
        transactions are producer state, so this never reads the log; ``fetch_offset``,
        the read_committed Fetch's, is accepted for engines that would need it)."""
        ...

    def aborted_transactions(self, topic: str, partition: int, start: int,
                             end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)
        (the segment log reads them from its ``.txnindex`` files)."""
        ...

    def active_producers(self, topic: str, partition: int) -> list[tuple[int, int, int, int, int, int]] | None:
        """DescribeProducers: (id, epoch, last sequence, last timestamp, open txn start
        offset or -1, coordinator epoch of its last marker or -1) per producer; None for
        an unknown partition."""
        ...

    def write_txn_marker(self, topic: str, partition: int, producer_id: int,
                         producer_epoch: int, *, commit: bool,
                         coordinator_epoch: int) -> AppendResult:
        """Append a commit/abort control batch (Kafka's WriteTxnMarkers, done in-process);
        TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the producer's
        last marker's."""
        ...

    def list_offset(self, topic: str, partition: int, timestamp: int) -> ListedOffset:
        """LATEST, EARLIEST, MAX_TIMESTAMP, or the first record at or after a time."""
        ...

    def high_watermark(self, topic: str, partition: int) -> int | None: ...

    def log_start_offset(self, topic: str, partition: int) -> int | None: ...

    def partition_stats(self, topic: str) -> list[PartitionStats] | None:
        """Every partition's offsets, size and traffic counters; None for an unknown topic.
        Read-only and from memory: safe to call from the event loop at any rate."""
        ...

    @property
    def fsync_latency(self) -> LatencyHistogram | None:
        """Durations of the flush rounds (fsyncs); None when the engine never fsyncs."""
        ...

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Return when one of ``partitions`` gets an append, or after ``timeout_s``."""
        ...

    def log_end_offset(self, topic: str, partition: int) -> int | None:
        """The offset the next append gets (above the high watermark while a cluster's
        followers catch up)."""
        ...

    # -- maintenance of one partition (the offsets store's compaction) ---------------------

    def read_bytes(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes | None:
        """Whole batches from ``offset`` as bytes (internal readers); None at the end."""
        ...

    def roll(self, topic: str, partition: int) -> int:
        """Start a new segment at the log end offset; returns that offset."""
        ...

    async def flush(self, topic: str, partition: int) -> None:
        """Make everything appended so far durable."""
        ...

    async def delete_records_below(self, topic: str, partition: int, offset: int) -> int:
        """Drop whole segments that end at or below ``offset``; returns the new log start
        offset (<= ``offset``; == ``offset`` when it is a segment boundary made by roll)."""
        ...

    # -- producer ids ---------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, also across restarts."""
        ...


class ReplicaLog(Protocol):
    """What cluster replication (logserver/cluster) does to the log of a replica, beyond
    what clients may ask: a follower appends its leader's batches at their offsets and
    truncates or restarts its log to match the leader's; a leader takes the replicated
    high watermark and the leader epoch it stamps."""

    #: Called after each successful append with (topic, partition): an awaitable that the
    #: append's ``wait`` then also covers (the cluster sets it for internal topics, whose
    #: writers acknowledge only replicated records); None on a single node.
    replication_hook: Callable[[str, int], Awaitable[None] | None] | None

    def set_high_watermark(self, topic: str, partition: int, offset: int | None) -> None:
        """The replicated high watermark (None: the log end offset, as on a single node);
        reads by consumers stop there."""
        ...

    def set_leader_epoch(self, topic: str, partition: int, epoch: int) -> None:
        """The leader epoch stamped on the batches appended from now on."""
        ...

    def append_replica(self, topic: str, partition: int, records: memoryview) -> int:
        """A follower appends batches fetched from its leader, keeping their offsets;
        returns the new log end offset. Raises KeyError for an unknown partition and
        ValueError when the batches do not continue the log."""
        ...

    async def truncate_to(self, topic: str, partition: int, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after it; the new log end."""
        ...

    async def restart_at(self, topic: str, partition: int, offset: int) -> int:
        """Empty the partition's log and continue it at ``offset`` (Kafka's
        truncateFullyAndStartAt: a follower whose log ends below its leader's log start
        offset, after DeleteRecords or retention there); returns the new log end."""
        ...


class StorageEngine(Storage, ReplicaLog, Protocol):
    """A storage engine: the client-facing interface and the replica-log one."""
