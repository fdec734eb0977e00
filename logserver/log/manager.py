"""The data directory: topic metadata, partition logs, checkpoints, clean-shutdown marker.

Layout (Kafka's names where Kafka has one)::

    <data>/.lock                              flock: one process per data directory
    <data>/__topics.json                      topic -> id, partition count, configs
    <data>/__broker_configs.json              dynamic broker configs (AlterConfigs on a broker)
    <data>/recovery-point-offset-checkpoint   "0", count, "topic partition offset" lines
    <data>/log-start-offset-checkpoint        the same format: log start offsets moved by
                                              DeleteRecords (inside a segment)
    <data>/.kafka_cleanshutdown               present only after a clean close
    <data>/<topic>-<partition>/               one Log (segments, indexes, snapshots) and
                                              partition.metadata (the topic id)

Every metadata file is replaced atomically (write tmp, fsync, rename, fsync directory).
The marker is removed when the manager opens and written by ``close()`` after every log
has been flushed and closed; its absence makes each Log re-validate everything after its
checkpointed recovery point.

Blocking work of the running server (the periodic recovery-point checkpoint, retention
and compaction via ``cleanup``) goes to ``worker``, a storage worker thread the event
loop only awaits; removed files and directories are deleted by ``deleter`` after
``log.segment.delete.delay.ms`` (``file.delete.delay.ms`` per topic).
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logserver.broker_overrides import BrokerOverrides, Overlay
from logserver.gc_pause import gc_paused
from logserver.log.append_writer import AppendWriter
from logserver.log.cleaner import Cleaner
from logserver.log.config import LogConfig
from logserver.log.config import setting_value as _setting
from logserver.log.deleter import FileDeleter
from logserver.log.errors import (
    DataDirError,
    InvalidTopicError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.log.file_cache import FILE_HANDLES
from logserver.log.fsutil import atomic_write, child_path, fsync_dir, sync_filesystem
from logserver.log.local_log import DELETE_DIR_SUFFIX
from logserver.log.log import Log
from logserver.log.offset_map import DEFAULT_DEDUPE_BUFFER_BYTES
from logserver.log.partition_metadata import ensure_topic_id, write_topic_id
from logserver.log.worker import StorageWorker
from logserver.topic_names import topic_name_error

logger = logging.getLogger(__name__)

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "CleanupPolicy",
    "RECOVERY_POINT_FILE",
    "TOPICS_FILE",
    "LogManager",
    "TopicInfo",
    "validate_topic_name",
]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
TOPICS_FILE = "__topics.json"
BROKER_CONFIGS_FILE = "__broker_configs.json"
LOCK_FILE = ".lock"
DELETE_SUFFIX = DELETE_DIR_SUFFIX
_CHECKPOINT_VERSION = 0
#: From this many partitions on, a clean shutdown writes every log's last state without
#: fsyncs and then syncs the file system once (``syncfs``): ~5 fsyncs per written
#: partition one by one took ~35 ms each on a busy disk (1,000 partitions: half a minute).
BATCHED_SYNC_PARTITIONS = 1000
TOPICS_LAYOUT_VERSION = 1


@dataclass(frozen=True, slots=True)
class CleanupPolicy:
    """What the periodic cleanup does to one topic (its cleanup.policy and tombstone time)."""

    compact: bool = False
    delete: bool = True
    delete_retention_ms: int = 86_400_000


def validate_topic_name(name: str) -> None:
    """Kafka's topic-name rules (see logserver.topic_names), as an exception."""
    problem = topic_name_error(name)
    if problem is not None:
        raise InvalidTopicError(problem)


def lock_data_dir(data_dir: Path) -> int:
    """Exclusive lock on the data directory; one process (server or repair) at a time."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirLockedError(f"{data_dir} is in use by another process") from None
    return fd


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the metadata file records about one topic."""

    name: str
    topic_id: bytes  # 16 bytes (uuid4), as Metadata v10+ / Fetch v13+ carry it
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


class LogManager:
    """Owns every partition Log under one data directory.

    All methods run on the event-loop thread except ``create_topic``,
    ``create_partitions``, ``delete_topic``, ``flush``, ``checkpoint_recovery_points`` and
    ``cleanup``, which run on worker threads; a topic's state changes under the lock in one
    step, after its files are complete.
    """

    def __init__(
        self, data_dir: Path | str, config: Mapping[str, Any] | object | None = None
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._settings = config
        self.broker_overrides = self._read_broker_overrides()
        self.config = LogConfig.from_settings(Overlay(config, self.broker_overrides.effective()))
        self._lock = threading.Lock()  # guards _topics/_logs against the flush thread
        self._checkpoint_lock = threading.Lock()
        self._topics_lock = threading.Lock()  # one topic creation/deletion at a time
        self._lock_fd = self._acquire_dir_lock()
        self.allow_data_loss = bool(_setting(config, "log.recovery.allow.data.loss"))
        handles = _setting(config, "log.file.handles.max")
        if handles is not None:  # process-wide: descriptors are the process's
            FILE_HANDLES.configure(int(handles))
        self.recovery_actions: list[str] = []  # what start-up recovery did, one line each
        interval = _setting(config, "log.flush.offset.checkpoint.interval.ms")
        self._checkpoint_interval_s = (60_000 if interval is None else int(interval)) / 1000
        self._last_checkpoint = time.monotonic()
        self._checkpoint_job: Future[None] | None = None
        self._closed = False
        self._logs: dict[tuple[str, int], Log] = {}
        self.deleter = FileDeleter()
        self.worker = StorageWorker("log-worker", max_workers=2)  # cleanup + checkpoints
        writer_min = _setting(config, "log.writer.thread.min.bytes")
        # Large appends written off the event loop (logserver.log.append_writer); -1: off.
        self.writer = (AppendWriter(int(writer_min))
                       if writer_min is not None and int(writer_min) >= 0 else None)
        dedupe = _setting(config, "log.cleaner.dedupe.buffer.size")
        self.cleaner = Cleaner(DEFAULT_DEDUPE_BUFFER_BYTES if dedupe is None else int(dedupe))
        try:
            marker = self.data_dir / CLEAN_SHUTDOWN_FILE
            self.had_clean_shutdown = marker.exists()
            if self.had_clean_shutdown:
                marker.unlink()
                fsync_dir(self.data_dir)
            self._remove_deleted_dirs()
            # Tens of thousands of long-lived objects and no garbage: see logserver.gc_pause.
            with gc_paused():
                self._topics: dict[str, TopicInfo] = self._read_topics()
                recovery_points = self._read_checkpoint()
                self._start_offsets = self._read_checkpoint(LOG_START_OFFSET_FILE)
                if not self.had_clean_shutdown and self._topics:
                    logger.warning(
                        "%s: no clean shutdown marker: recovering every partition from its "
                        "recovery point",
                        self.data_dir,
                    )
                existing = set(os.listdir(self.data_dir))  # one listing, not a stat each
                for info in self._topics.values():
                    resolved = self.config.with_overrides(info.configs)
                    for p in range(info.partitions):
                        log = self._open_log(info, p, recovery_points.get((info.name, p), 0),
                                             config=resolved, existing=existing)
                        self._logs[(info.name, p)] = log
                        if log.directory.name in existing:
                            ensure_topic_id(log.directory, info.topic_id)
                        self.recovery_actions.extend(log.recovery_actions)
            self._warn_orphans(existing)
            if self.recovery_actions:
                logger.warning(
                    "%s: start-up recovery repaired %d things:\n  %s",
                    self.data_dir,
                    len(self.recovery_actions),
                    "\n  ".join(self.recovery_actions),
                )
        except BaseException:
            for log in self._logs.values():
                log.close(flush=False)
            if self.writer is not None:
                self.writer.close()
            os.close(self._lock_fd)
            self.deleter.close()
            raise

    # -- opening ---------------------------------------------------------------------

    def _acquire_dir_lock(self) -> int:
        return lock_data_dir(self.data_dir)

    def _open_log(
        self, info: TopicInfo, partition: int, recovery_point: int, *, new: bool = False,
        config: LogConfig | None = None, existing: set[str] | None = None,
    ) -> Log:
        """``config``: the topic's resolved config, when the caller opens many partitions;
        ``existing``: the data directory's names, listed once for them all (no stat each)."""
        name = f"{info.name}-{partition}"
        return Log(
            child_path(self.data_dir, name),
            config or self.config.with_overrides(info.configs),
            topic=info.name,
            partition=partition,
            recovery_point=recovery_point,
            log_start_offset=0 if new else self._start_offsets.get((info.name, partition), 0),
            clean_shutdown=new or self.had_clean_shutdown,
            allow_data_loss=self.allow_data_loss,
            deleter=self.deleter,
            writer=self.writer,
            # A partition's directory and files are made by its first append (as its
            # partition.metadata): creating or loading an empty one touches no disk.
            lazy_directory=True,
            on_create_directory=functools.partial(_write_topic_id, info.topic_id),
            directory_exists=None if existing is None else name in existing,
        )

    def _remove_deleted_dirs(self) -> None:
        for path in self.data_dir.iterdir():
            if path.is_dir() and path.name.endswith(DELETE_SUFFIX):
                logger.info("%s: finishing deletion of %s", self.data_dir, path.name)
                shutil.rmtree(path, ignore_errors=True)

    def _warn_orphans(self, existing: set[str]) -> None:
        known = {f"{t}-{p}" for t, p in self._logs}
        for name in sorted(existing - known):
            path = self.data_dir / name
            if path.is_dir():
                logger.warning(
                    "%s: directory %s belongs to no known topic; left alone",
                    self.data_dir,
                    path.name,
                )

    def _read_topics(self) -> dict[str, TopicInfo]:
        return read_topics_file(self.data_dir / TOPICS_FILE)

    def _read_broker_overrides(self) -> BrokerOverrides:
        path = self.data_dir / BROKER_CONFIGS_FILE
        try:
            return BrokerOverrides.from_json(json.loads(path.read_text("utf-8")))
        except FileNotFoundError:
            return BrokerOverrides()

    def set_broker_overrides(self, overrides: BrokerOverrides) -> LogConfig:
        """Persist new dynamic broker configs and re-resolve every log's config (worker
        thread); returns the new broker defaults of the topic settings."""
        defaults = LogConfig.from_settings(Overlay(self._settings, overrides.effective()))
        with self._topics_lock:
            atomic_write(self.data_dir / BROKER_CONFIGS_FILE,
                         json.dumps(overrides.as_json(), indent=1, sort_keys=True).encode())
            self.broker_overrides = overrides
            self.config = defaults
            with self._lock:
                topics = list(self._topics.values())
                logs = dict(self._logs)
        for info in topics:
            resolved = defaults.with_overrides(info.configs)
            for p in range(info.partitions):
                if (info.name, p) in logs:
                    logs[(info.name, p)].config = resolved
        logger.info("dynamic broker configs now %s", overrides.effective())
        return defaults

    def _write_topics(self, topics: Mapping[str, TopicInfo]) -> None:
        doc = {
            "version": TOPICS_LAYOUT_VERSION,
            "topics": {
                info.name: {
                    "topic_id": str(uuid.UUID(bytes=info.topic_id)),
                    "partitions": info.partitions,
                    "configs": dict(info.configs),
                }
                for info in topics.values()
            },
        }
        atomic_write(
            self.data_dir / TOPICS_FILE, json.dumps(doc, indent=1, sort_keys=True).encode()
        )

    def _read_checkpoint(self, name: str = RECOVERY_POINT_FILE) -> dict[tuple[str, int], int]:
        """Kafka's OffsetCheckpointFile: version, count, then "topic partition offset"."""
        path = self.data_dir / name
        try:
            lines = path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return {}
        try:
            if int(lines[0]) != _CHECKPOINT_VERSION:
                raise ValueError(f"version {lines[0]!r}")
            count = int(lines[1])
            points = {}
            for line in lines[2 : 2 + count]:
                topic, partition, offset = line.split()
                points[(topic, int(partition))] = int(offset)
            if len(points) != count:
                raise ValueError(f"expected {count} entries, found {len(points)}")
            return points
        except (ValueError, IndexError) as exc:
            # Recovering from offset 0 is always safe, only slower.
            logger.warning("%s: unreadable (%s); recovering every log from the start", path, exc)
            return {}

    # -- topics ------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Create the partition logs, then persist the topic; all or nothing.

        Safe on a worker thread: the topic appears in ``topics()``/``get_log`` (under the
        lock, in one step) only after its logs exist and the metadata file records it. A
        failure removes whatever was created.
        """
        validate_topic_name(name)
        if partitions < 1:
            raise InvalidTopicError(f"partition count must be >= 1, got {partitions}")
        configs = {k: str(v) for k, v in (configs or {}).items() if v is not None}
        self.config.with_overrides(configs)  # raises ValueError on bad values, before any file
        with self._topics_lock:
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            info = TopicInfo(name, uuid.uuid4().bytes, partitions, configs)
            self._add_partitions(info, range(partitions))
        # debug: the storage layer above logs the creation (with its configs) once
        logger.debug("created topic %s with %d partitions", name, partitions)
        return info

    def create_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow a topic to ``total`` partitions (CreatePartitions); never shrinks."""
        with self._topics_lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            if total <= info.partitions:
                raise InvalidTopicError(
                    f"topic {name!r} has {info.partitions} partitions; {total} is not more"
                )
            new = TopicInfo(name, info.topic_id, total, info.configs)
            self._add_partitions(new, range(info.partitions, total))
        return new

    def _add_partitions(self, info: TopicInfo, partitions: range) -> None:
        with gc_paused():  # (see logserver.gc_pause: the collector dominated at 50,000)
            self._add_partitions_paused(info, partitions)

    def _add_partitions_paused(self, info: TopicInfo, partitions: range) -> None:
        logs: dict[tuple[str, int], Log] = {}
        try:
            existing = set(os.listdir(self.data_dir))
            resolved = self.config.with_overrides(info.configs)  # once, not per partition
            stale = False
            for p in partitions:
                name = f"{info.name}-{p}"
                if name in existing:
                    # Left behind by a delete or a creation that crashed half-way.
                    logger.warning("%s: removing stale directory %s", self.data_dir, name)
                    shutil.rmtree(self.data_dir / name)
                    existing.discard(name)
                    stale = True
                # No directory, no file: the first append makes them (Log, lazy_directory).
                logs[(info.name, p)] = self._open_log(info, p, 0, new=True, config=resolved,
                                                      existing=existing)
            if stale:
                fsync_dir(self.data_dir)
            self._write_topics({**self._topics, info.name: info})
        except BaseException:
            for log in logs.values():
                log.close(flush=False)
            # Every new partition's directory goes, also the one whose opening failed
            # half-way (out of descriptors): nothing of the topic stays on disk.
            for p in partitions:
                shutil.rmtree(self.data_dir / f"{info.name}-{p}", ignore_errors=True)
            raise
        with self._lock:
            self._topics[info.name] = info
            self._logs.update(logs)

    def delete_topic(self, name: str) -> None:
        """Forget the topic (persisted first), then delete its partitions.

        Each partition directory is renamed ``<topic>-<p>.<uuid>-delete`` at once, so a
        topic of the same name can be created right away, and removed after
        ``file.delete.delay.ms``; fetches still sending from it keep their bytes.
        """
        with self._topics_lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            self._write_topics({n: t for n, t in self._topics.items() if n != name})
            with self._lock:
                del self._topics[name]
                logs = [
                    self._logs.pop((name, p))
                    for p in range(info.partitions)
                    if (name, p) in self._logs
                ]
        for log in logs:
            log.delete()
        if (self.data_dir / LOG_START_OFFSET_FILE).exists():
            self.save_start_offsets()  # a new topic of that name starts at 0
        fsync_dir(self.data_dir)
        logger.debug("deleted topic %s", name)  # logged once, by the storage layer

    def get_log(self, topic: str, partition: int) -> Log:
        log = self._logs.get((topic, partition))
        if log is None:
            raise UnknownTopicOrPartitionError(f"unknown topic partition {topic}-{partition}")
        return log

    def logs(self) -> dict[tuple[str, int], Log]:
        with self._lock:
            return dict(self._logs)

    # -- durability ----------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every log, then checkpoint the recovery points (safe on a worker thread)."""
        for log in self.logs().values():
            log.flush()
        self.checkpoint_recovery_points()

    def maybe_checkpoint_recovery_points(self) -> Future[None] | None:
        """Checkpoint at most every ``log.flush.offset.checkpoint.interval.ms`` (Kafka: 60 s).

        Call after each flush (from the event loop): the checkpoint costs two fsyncs, so
        it is written on the storage worker; a stale one is safe (recovery just
        re-validates a little more). Returns the started job, or None if none was due
        or one is still running.
        """
        now = time.monotonic()
        if now - self._last_checkpoint < self._checkpoint_interval_s or self._closed:
            return None
        job = self._checkpoint_job
        if job is not None and not job.done():
            return None
        self._last_checkpoint = now
        job = self._checkpoint_job = self.worker.submit(self._checkpoint_logged)
        return job

    def _checkpoint_logged(self) -> None:
        try:
            self.checkpoint_recovery_points()
        except Exception:
            logger.exception("%s: writing the recovery-point checkpoint failed", self.data_dir)
            raise

    def checkpoint_recovery_points(self) -> None:
        """Write every log's current recovery point (what its last flush made durable)."""
        with self._checkpoint_lock:
            self._last_checkpoint = time.monotonic()
            points = sorted(
                (topic, partition, log.recovery_point)
                for (topic, partition), log in self.logs().items()
            )
            self._write_checkpoint(RECOVERY_POINT_FILE, points)

    def _write_checkpoint(self, name: str, points: list[tuple[str, int, int]]) -> None:
        lines = [str(_CHECKPOINT_VERSION), str(len(points))]
        lines.extend(f"{t} {p} {o}" for t, p, o in points)
        atomic_write(self.data_dir / name, ("\n".join(lines) + "\n").encode())

    # -- admin changes (worker thread) -------------------------------------------------------

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` and persist it before
        answering (Kafka's log-start-offset-checkpoint); returns the new log start offset."""
        start = self.get_log(topic, partition).delete_records(offset)
        self.save_start_offsets()
        return start

    def save_start_offsets(self) -> None:
        """Persist every partition's log start offset (log-start-offset-checkpoint)."""
        with self._checkpoint_lock:
            points = sorted((t, p, log.log_start_offset) for (t, p), log in self.logs().items()
                            if log.log_start_offset > 0)
            self._write_checkpoint(LOG_START_OFFSET_FILE, points)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace a topic's config overrides: persisted first, then applied to every
        partition log at once (retention and segment rolls read them)."""
        configs = {k: str(v) for k, v in configs.items() if v is not None}
        resolved = self.config.with_overrides(configs)  # ValueError before anything changes
        with self._topics_lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            new = TopicInfo(name, info.topic_id, info.partitions, configs)
            self._write_topics({**self._topics, name: new})
            with self._lock:
                self._topics[name] = new
                logs = [self._logs[(name, p)] for p in range(new.partitions) if (name, p) in self._logs]
        for log in logs:
            log.config = resolved
        logger.info("topic %s: configs now %s", name, configs)
        return new

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments(now_ms) for log in self.logs().values())

    def cleanup(
        self,
        policies: Mapping[str, CleanupPolicy],
        now_ms: int | None = None,
        *,
        keep_deleted: bool = False,
    ) -> list[Path]:
        """Apply retention to the topics in ``policies`` (on a worker thread; compaction
        runs on its own cadence: ``compact``).

        Returns the ``.log.deleted`` paths of the segments retention deleted when
        ``keep_deleted`` (for the delete hook). A failure in one partition is logged and
        never stops the others.
        """
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        deleted: list[Path] = []
        for (topic, partition), log in sorted(self.logs().items()):
            policy = policies.get(topic)
            if policy is None or self._closed:
                continue
            try:
                if policy.delete:
                    log.delete_old_segments(now, keep_files=keep_deleted)
                    deleted.extend(log.take_deleted_paths())
            except Exception:
                logger.exception("%s-%d: log cleanup failed", topic, partition)
        closed = 0
        for (topic, partition), log in self.logs().items():
            try:  # segments nobody read for a whole pass give their descriptors back
                closed += log.close_idle_files()
            except OSError:
                logger.exception("%s-%d: closing idle segment files failed", topic, partition)
        if closed:
            logger.debug("closed %d descriptors of idle segments", closed)
        return deleted

    def compact(self, policies: Mapping[str, CleanupPolicy], now_ms: int | None = None) -> int:
        """One log-cleaner pass (on a worker thread): compact every log of a
        ``cleanup.policy=compact`` topic that has something to clean; returns the number
        of logs cleaned. A failure in one partition is logged and never stops the others."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        cleaned = 0
        for (topic, partition), log in sorted(self.logs().items()):
            policy = policies.get(topic)
            if policy is None or not policy.compact or self._closed:
                continue
            try:
                if self.cleaner.needs_cleaning(log, policy.delete_retention_ms, now):
                    self.cleaner.clean(log, policy.delete_retention_ms, now)
                    cleaned += 1
            except Exception:
                logger.exception("%s-%d: log cleanup failed (compaction)", topic, partition)
        return cleaned

    def close(self) -> None:
        """Flush and close every log, checkpoint, then write the clean-shutdown marker."""
        if self._closed:
            return
        self._closed = True
        try:
            self.cleaner.abort()  # a running compaction stops at its next batch
            self.worker.close(wait=True)  # a running cleanup or checkpoint ends first
            logs = list(self.logs().values())
            batched = len(logs) >= BATCHED_SYNC_PARTITIONS
            for log in logs:
                log.close(sync=not batched)  # finishes its queued writes, flushes
            if self.writer is not None:
                self.writer.close()
            if batched:  # one syncfs instead of ~5 fsyncs per partition, before the
                sync_filesystem(self.data_dir)  # recovery points and the marker say so
            self.checkpoint_recovery_points()
            marker = self.data_dir / CLEAN_SHUTDOWN_FILE
            atomic_write(marker, b"")
            logger.info("%s: clean shutdown", self.data_dir)
        finally:
            self.deleter.close()
            os.close(self._lock_fd)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _write_topic_id(topic_id: bytes, directory: Path) -> None:
    write_topic_id(directory, topic_id)


def read_topics_file(path: Path) -> dict[str, TopicInfo]:
    """The topic list of a data directory (empty when there is none yet); DataDirError when
    it cannot be read by this version, so start-up and `logserver check` agree."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataDirError(f"{path} is not a readable topic list ({exc})") from None
    version = doc.get("version") if isinstance(doc, dict) else None
    if version != TOPICS_LAYOUT_VERSION:
        raise DataDirError(f"{path} has layout version {version!r}, this logserver reads "
                           f"version {TOPICS_LAYOUT_VERSION}: a data directory of another version")
    topics = {}
    try:
        for name, entry in doc["topics"].items():
            topics[name] = TopicInfo(
                name=name,
                topic_id=uuid.UUID(entry["topic_id"]).bytes,
                partitions=int(entry["partitions"]),
                configs=dict(entry.get("configs", {})),
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataDirError(f"{path} is not a readable topic list "
                           f"({type(exc).__name__}: {exc})") from None
    return topics
