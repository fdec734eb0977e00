"""The cluster-wide default dynamic broker configs (resource BROKER, name ""), in etcd.

Kafka keeps the cluster default level of the dynamic broker configs in its metadata; here
it is one key, ``{prefix}/broker_configs/default``, a JSON object of setting -> value,
replaced by a compare-and-swap. Every broker's watch records it and its reconcile pass
installs it as its own ``cluster_default`` level (its per-node level stays its own, as in
Kafka, where ``--entity-name <id>`` changes one broker). Until the key exists each
broker keeps the default level it had stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from logserver.broker_overrides import BrokerOverrides
from logserver.cluster.errors import MetadataUnavailableError, etcd_failures
from logserver.cluster.etcd import EtcdStore
from logserver.storage.api import Storage

__all__ = ["ClusterBrokerDefaults"]

log = logging.getLogger(__name__)


class ClusterBrokerDefaults:
    def __init__(self, root: bytes, store: EtcdStore) -> None:
        self.key = root + b"broker_configs/default"
        self.store = store
        self.wanted: dict[str, str] | None = None  # None: the cluster has none yet

    def apply(self, key: bytes, value: bytes | None) -> None:
        """A watched change (or the start-up snapshot's value)."""
        if key != self.key or value is None:
            return
        try:
            self.wanted = {str(k): str(v) for k, v in json.loads(value).items()}
        except (ValueError, AttributeError) as exc:
            log.error("ignoring damaged %s in etcd: %s", key.decode(), exc)

    async def alter(self, level: Mapping[str, str]) -> None:
        """Make ``level`` the cluster's default level, whatever it was."""
        try:
            await self._swap(level)
        except etcd_failures() as exc:
            raise MetadataUnavailableError(f"etcd failed: {exc}") from exc

    async def _swap(self, level: Mapping[str, str]) -> None:
        while True:
            found = await self.store.get(self.key)
            if await self.store.swap(self.key, json.dumps(dict(level), sort_keys=True).encode(),
                                     0 if found is None else found[1]):
                self.wanted = dict(level)
                log.info("cluster default broker configs now %s", dict(level))
                return

    async def install(self, storage: Storage) -> None:
        """Bring the local default level to the cluster's (a reconcile step)."""
        if self.wanted is None:
            return
        current = storage.broker_overrides()
        if dict(current.cluster_default) == self.wanted:
            return
        try:
            await storage.alter_broker_overrides(BrokerOverrides(dict(self.wanted),
                                                                 current.this_broker))
            log.info("applied the cluster default broker configs %s", self.wanted)
        except Exception as exc:  # retried on the next pass
            log.warning("applying the cluster default broker configs failed: %s", exc)
