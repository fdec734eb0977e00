"""Cluster-wide topic config overrides: the ``configs`` of the topic record in etcd.

AlterConfigs / IncrementalAlterConfigs on any broker replace the record's overrides by a
compare-and-swap on its mod revision (a concurrent partition growth or config change
makes it plan again); every broker's reconcile pass then applies the record's overrides
to the topic's local log, where it has one (the leader enforces retention.ms and the
rest), and DescribeConfigs on any broker answers from the record, also for a topic it
holds no replica of. A broker restarted later applies the record once its snapshot is in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from logserver.cluster.errors import MetadataUnavailableError, etcd_failures
from logserver.cluster.model import TopicRecord
from logserver.storage.api import UnknownTopicOrPartitionError
from logserver.topic_config import (
    InvalidConfigError,
    kept_overrides,
    validate_overrides,
)

if TYPE_CHECKING:
    from logserver.cluster.etcd import EtcdStore
    from logserver.cluster.model import ClusterModel, Keys
    from logserver.storage.api import StorageEngine

__all__ = ["alter_topic_configs", "apply_topic_configs"]

log = logging.getLogger(__name__)


class ConfigsNode(Protocol):
    """What these read of the cluster node (logserver.cluster.node.ClusterNode): etcd,
    its keys and model, and the local storage engine."""

    keys: Keys
    store: EtcdStore
    model: ClusterModel

    @property
    def storage(self) -> StorageEngine: ...


async def alter_topic_configs(node: ConfigsNode, name: str, overrides: Mapping[str, str]) -> None:
    """Replace the topic's overrides in etcd; raises UnknownTopicOrPartitionError."""
    try:
        await _swap_configs(node, name, overrides)
    except etcd_failures() as exc:
        raise MetadataUnavailableError(f"etcd failed: {exc}") from exc


async def _swap_configs(node: ConfigsNode, name: str, overrides: Mapping[str, str]) -> None:
    key = node.keys.topic(name)
    while True:
        found = await node.store.get(key)
        if found is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        record = TopicRecord.decode(name, found[0])
        changed = TopicRecord(name, record.topic_id, record.partitions, dict(overrides))
        if await node.store.swap(key, changed.encode(), found[1]):
            log.info("topic %s: configs now %s (cluster-wide)", name, dict(overrides))
            return
        log.info("topic %s changed concurrently; planning its configs again", name)


async def apply_topic_configs(node: ConfigsNode) -> None:
    """Bring every local topic log's overrides to what its etcd record says."""
    storage = node.storage
    for name, record in list(node.model.topics.items()):
        local = storage.topic_overrides(name)
        if local is None:
            continue
        try:  # the canonical form the storage keeps, so that equal sets compare equal
            wanted = validate_overrides(kept_overrides(record.configs))
        except InvalidConfigError as exc:
            log.warning("topic %s: the cluster's configs are refused here: %s", name, exc)
            continue
        if dict(local) == wanted:
            continue
        try:
            await storage.alter_topic_config(name, wanted)
            log.info("topic %s: applied the cluster's configs %s", name, wanted)
        except UnknownTopicOrPartitionError:
            continue  # deleted meanwhile
        except Exception as exc:  # retried on the next pass
            log.warning("applying the configs of topic %s failed: %s", name, exc)
