"""One module per Kafka API; this registry says which versions of each we advertise.

A version is listed only when it is implemented: clients pick min(client max, ours).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkaproto import ApiKey
from logserver.cluster import envelope
from logserver.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    reassignments,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)


@dataclass(frozen=True)
class Handler:
    name: str
    min_version: int
    max_version: int
    handle: Callable[..., Any]


HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: Handler("Produce", 3, 9, produce.handle),
    ApiKey.FETCH: Handler("Fetch", 4, 16, fetch.handle),
    ApiKey.LIST_OFFSETS: Handler("ListOffsets", 1, 10, list_offsets.handle),
    # v2+ (Kafka 4 dropped v0-v1, KIP-896): followers, and consumers after a leader change
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handler("OffsetForLeaderEpoch", 2, 4,
                                            offset_for_leader_epoch.handle),
    ApiKey.METADATA: Handler("Metadata", 0, 12, metadata.handle),
    ApiKey.API_VERSIONS: Handler("ApiVersions", 0, 4, api_versions.handle),
    ApiKey.CREATE_TOPICS: Handler("CreateTopics", 2, 7, create_topics.handle),
    ApiKey.DELETE_TOPICS: Handler("DeleteTopics", 1, 6, delete_topics.handle),
    ApiKey.INIT_PRODUCER_ID: Handler("InitProducerId", 0, 4, init_producer_id.handle),
    ApiKey.DESCRIBE_CONFIGS: Handler("DescribeConfigs", 1, 4, describe_configs.handle),
    # -- admin changes to existing topics --
    ApiKey.CREATE_PARTITIONS: Handler("CreatePartitions", 0, 3, create_partitions.handle),
    ApiKey.DELETE_RECORDS: Handler("DeleteRecords", 0, 2, delete_records.handle),
    ApiKey.ALTER_CONFIGS: Handler("AlterConfigs", 0, 2, alter_configs.handle_alter),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Handler("IncrementalAlterConfigs", 0, 1,
                                              alter_configs.handle_incremental),
    ApiKey.DESCRIBE_LOG_DIRS: Handler("DescribeLogDirs", 0, 4, describe_log_dirs.handle),
    ApiKey.DESCRIBE_CLUSTER: Handler("DescribeCluster", 0, 1, describe_cluster.handle),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Handler("AlterPartitionReassignments", 0, 0,
                                                  reassignments.handle_alter),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Handler("ListPartitionReassignments", 0, 0,
                                                 reassignments.handle_list),
    # -- consumer groups (logserver/groups) --
    ApiKey.FIND_COORDINATOR: Handler("FindCoordinator", 0, 4, find_coordinator.handle),
    ApiKey.JOIN_GROUP: Handler("JoinGroup", 0, 9, join_group.handle),
    ApiKey.SYNC_GROUP: Handler("SyncGroup", 0, 5, sync_group.handle),
    ApiKey.HEARTBEAT: Handler("Heartbeat", 0, 4, heartbeat.handle),
    ApiKey.LEAVE_GROUP: Handler("LeaveGroup", 0, 5, leave_group.handle),
    ApiKey.OFFSET_COMMIT: Handler("OffsetCommit", 2, 9, offset_commit.handle),
    ApiKey.OFFSET_FETCH: Handler("OffsetFetch", 1, 9, offset_fetch.handle),
    ApiKey.LIST_GROUPS: Handler("ListGroups", 0, 5, list_groups.handle),
    ApiKey.DESCRIBE_GROUPS: Handler("DescribeGroups", 0, 5, describe_groups.handle),
    ApiKey.DELETE_GROUPS: Handler("DeleteGroups", 0, 2, delete_groups.handle),
    ApiKey.OFFSET_DELETE: Handler("OffsetDelete", 0, 0, offset_delete.handle),
    # -- the consumer group protocol, KIP-848 (logserver/groups/consumer) --
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Handler("ConsumerGroupHeartbeat", 0, 1,
                                             consumer_group_heartbeat.handle),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Handler("ConsumerGroupDescribe", 0, 1,
                                            consumer_group_describe.handle),
    # -- ACLs (logserver/security) --
    ApiKey.DESCRIBE_ACLS: Handler("DescribeAcls", 0, 3, describe_acls.handle),
    ApiKey.CREATE_ACLS: Handler("CreateAcls", 0, 3, create_acls.handle),
    ApiKey.DELETE_ACLS: Handler("DeleteAcls", 0, 3, delete_acls.handle),
    # -- authentication (logserver/security) --
    ApiKey.SASL_HANDSHAKE: Handler("SaslHandshake", 0, 1, sasl_handshake.handle),
    ApiKey.SASL_AUTHENTICATE: Handler("SaslAuthenticate", 0, 2, sasl_authenticate.handle),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Handler(
        "DescribeUserScramCredentials", 0, 0, describe_user_scram_credentials.handle),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Handler(
        "AlterUserScramCredentials", 0, 0, alter_user_scram_credentials.handle),
    # -- transactions (logserver/transactions) --
    ApiKey.ADD_PARTITIONS_TO_TXN: Handler("AddPartitionsToTxn", 0, 3, add_partitions_to_txn.handle),
    ApiKey.ADD_OFFSETS_TO_TXN: Handler("AddOffsetsToTxn", 0, 3, add_offsets_to_txn.handle),
    ApiKey.END_TXN: Handler("EndTxn", 0, 3, end_txn.handle),
    ApiKey.TXN_OFFSET_COMMIT: Handler("TxnOffsetCommit", 0, 3, txn_offset_commit.handle),
    ApiKey.WRITE_TXN_MARKERS: Handler("WriteTxnMarkers", 0, 1, write_txn_markers.handle),
    ApiKey.DESCRIBE_PRODUCERS: Handler("DescribeProducers", 0, 0, describe_producers.handle),
    ApiKey.DESCRIBE_TRANSACTIONS: Handler("DescribeTransactions", 0, 0, describe_transactions.handle),
    ApiKey.LIST_TRANSACTIONS: Handler("ListTransactions", 0, 1, list_transactions.handle),
}

# Not advertised in ApiVersions: APIs brokers use only among themselves. Envelope: a REST
# Proxy's produce forwarded to the leader as its caller (logserver/cluster/envelope.py).
# OffsetForLeaderEpoch, which followers ask, is served to clients too (KIP-320).
UNADVERTISED_HANDLERS: dict[int, Handler] = {
    ApiKey.ENVELOPE: Handler("Envelope", 0, 0, envelope.handle),
}
