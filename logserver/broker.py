"""The broker's state: topics, partitions, producer ids, durability, cluster identity."""

from __future__ import annotations

import logging
from typing import Any

from kafkaproto import ErrorCode
from logserver.cluster_meta import load_or_create_cluster_id
from logserver.config import Config
from logserver.durability import Durability
from logserver.groups import INTERNAL_TOPICS, GroupCoordinator
from logserver.limits import topic_limit_error
from logserver.log.manager import LogManager
from logserver.partition import LEADER_EPOCH, AppendResult, Partition
from logserver.producer_ids import ProducerIdAllocator

log = logging.getLogger(__name__)


class Broker:
    leader_epoch = LEADER_EPOCH

    def __init__(self, config: Config) -> None:
        self.config = config
        self.node_id: int = config["node.id"]
        self.data_dir = config.data_dir
        self.cluster_id = ""
        self.manager: LogManager | None = None
        self.producer_ids: ProducerIdAllocator
        self.durability = Durability(config["log.flush.interval.messages"], config["log.flush.interval.ms"],
                                     on_flushed=self._on_flushed)
        self._partitions: dict[str, list[Partition]] = {}
        self.groups = GroupCoordinator(self)  # consumer groups (logserver/groups)

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_or_create_cluster_id(self.data_dir, self.node_id)
        self.producer_ids = ProducerIdAllocator(self.data_dir)
        self.manager = LogManager(self.data_dir, self.config)
        for name in self.manager.topics():
            self._load_topic(name)
        log.info("opened %s: %d topics, %d partitions", self.data_dir, len(self._partitions),
                 sum(len(p) for p in self._partitions.values()))

    async def start(self) -> None:
        self.durability.start()
        self.groups.start()

    async def close(self) -> None:
        await self.groups.close()
        await self.durability.close()
        if self.manager is not None:
            self.manager.close()
            self.manager = None

    def _on_flushed(self, logs: list[Any]) -> None:
        if self.manager is not None:
            self.manager.maybe_checkpoint_recovery_points()

    # -- topics ---------------------------------------------------------------------------

    def _load_topic(self, name: str) -> None:
        assert self.manager is not None
        meta = self.manager.topic(name)
        assert meta is not None
        overrides = meta.configs
        timestamp_type = overrides.get("message.timestamp.type", self.config["log.message.timestamp.type"])
        max_bytes = int(overrides.get("max.message.bytes", self.config["message.max.bytes"]))
        self._partitions[name] = [
            Partition(name, index, self.manager.get_log(name, index),
                      log_append_time=timestamp_type == "LogAppendTime", max_message_bytes=max_bytes)
            for index in range(meta.partitions)
        ]

    def topic_names(self) -> list[str]:
        return sorted(self._partitions)

    def partition_count(self, name: str) -> int | None:
        partitions = self._partitions.get(name)
        return None if partitions is None else len(partitions)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        partitions = self._partitions.get(topic)
        if partitions is None or not 0 <= index < len(partitions):
            return None
        return partitions[index]

    def topic_id(self, name: str) -> bytes:
        assert self.manager is not None
        meta = self.manager.topic(name)
        return meta.topic_id if meta is not None else bytes(16)

    def topic_name_for_id(self, topic_id: bytes | None) -> str | None:
        assert self.manager is not None
        for name, meta in self.manager.topics().items():
            if meta.topic_id == topic_id:
                return name
        return None

    def topic_configs(self, name: str) -> dict[str, str] | None:
        assert self.manager is not None
        meta = self.manager.topic(name)
        return None if meta is None else dict(meta.configs)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        assert self.manager is not None
        self.manager.create_topic(name, partitions, configs)
        self._load_topic(name)
        log.info("created topic %s with %d partitions%s", name, partitions,
                 f" and configs {configs}" if configs else "")

    def topic_limit_error(self, new_partitions: int) -> str | None:
        """Why one more topic of ``new_partitions`` would break max.topics / max.partitions."""
        return topic_limit_error(self.config, len(self._partitions),
                                 sum(len(p) for p in self._partitions.values()), new_partitions)

    def delete_topic(self, name: str) -> None:
        assert self.manager is not None
        self._partitions.pop(name, None)
        self.manager.delete_topic(name)
        log.info("deleted topic %s", name)
        self.groups.on_topic_deleted(name)  # its committed offsets go too, as in Kafka

    # -- produce --------------------------------------------------------------------------

    def produce(self, topic: str, index: int, records: Any, api_version: int, *,
                internal: bool = False) -> AppendResult:
        if topic in INTERNAL_TOPICS and not internal:  # only the group coordinator writes there
            return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                message=f"cannot append to internal topic {topic}")
        partition = self.get_partition(topic, index)
        if partition is None:
            return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                message=f"no partition {index} of topic {topic!r}")
        try:
            result = partition.append(records, api_version)
        except OSError as exc:  # disk full or I/O error; the segment cut the partial write off
            log.error("append to %s-%d failed: %s", topic, index, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"write failed: {exc.strerror}")
        if result.error == ErrorCode.NONE:
            result.wait = self.durability.appended(partition.log)
        else:
            log.debug("produce to %s-%d refused: %s", topic, index, result.message)
        return result

    @property
    def advertised_address(self) -> tuple[str, int]:
        listener = self.config.advertised[0]
        return listener.host, listener.port
