"""The APIs a cluster member serves its own way; the dispatcher uses these instead of
logserver/handlers/ in cluster mode (EXTRA_HANDLERS: APIs only brokers use, not advertised).

Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, WriteTxnMarkers and InitProducerId are not here: the single-node handlers
serve them in both modes, asking ``broker.routing`` (logserver.cluster.routing)."""

from __future__ import annotations

from typing import Any

from kafkaproto import ApiKey
from logserver.cluster import envelope, partitions_admin, reassignments_admin, services, topics
from logserver.handlers import Handler

# Not advertised in ApiVersions: APIs brokers use only among themselves. Envelope: a REST
# Proxy's produce forwarded to the leader as its caller (envelope.py). OffsetForLeaderEpoch,
# which followers ask, is served to clients too (KIP-320), in both modes
# (logserver/handlers/offset_for_leader_epoch.py).
EXTRA_HANDLERS: dict[int, Any] = {
    ApiKey.ENVELOPE: Handler("Envelope", 0, 0, envelope.handle),
}

HANDLERS: dict[int, Any] = {
    ApiKey.METADATA: topics.metadata,
    ApiKey.CREATE_TOPICS: topics.create_topics,
    ApiKey.DELETE_TOPICS: topics.delete_topics,
    ApiKey.FIND_COORDINATOR: services.find_coordinator,
    ApiKey.CREATE_PARTITIONS: partitions_admin.create_partitions,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments_admin.alter,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments_admin.list_,
}
