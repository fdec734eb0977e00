"""The APIs a cluster member serves its own way; the dispatcher uses these instead of
logserver/handlers/ in cluster mode (EXTRA_HANDLERS: APIs only brokers use, not advertised).

Produce, Fetch, ListOffsets, DeleteRecords, WriteTxnMarkers and InitProducerId are not here: the single-node handlers
serve them in both modes, asking ``broker.routing`` (logserver.cluster.routing)."""

from __future__ import annotations

from typing import Any

from kafkaproto import ApiKey
from logserver.cluster import data_path, partitions_admin, reassignments_admin, services, topics
from logserver.handlers import Handler

# Not advertised in ApiVersions: brokers use them among themselves, and clients skip the
# validation they would do with them.
EXTRA_HANDLERS: dict[int, Any] = {
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handler("OffsetForLeaderEpoch", 3, 4, data_path.offset_for_leader_epoch),
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
