"""The versions of each Kafka API this broker serves: ApiVersions advertises them and
the dispatcher refuses others. Data only, so that ApiVersions and Envelope, which need
the table, import it without importing every handler (logserver.handlers maps each key
to its handler function).

A version is listed only when it is implemented: clients pick min(client max, ours).
"""

from __future__ import annotations

from typing import NamedTuple

from kafkaproto import ApiKey

__all__ = ["ADVERTISED", "UNADVERTISED", "Versions"]


class Versions(NamedTuple):
    name: str
    min_version: int
    max_version: int


ADVERTISED: dict[int, Versions] = {
    ApiKey.PRODUCE: Versions("Produce", 3, 9),
    ApiKey.FETCH: Versions("Fetch", 4, 16),
    ApiKey.LIST_OFFSETS: Versions("ListOffsets", 1, 10),
    # v2+ (Kafka 4 dropped v0-v1, KIP-896): followers, and consumers after a leader change
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Versions("OffsetForLeaderEpoch", 2, 4),
    ApiKey.METADATA: Versions("Metadata", 0, 12),
    ApiKey.API_VERSIONS: Versions("ApiVersions", 0, 4),
    ApiKey.CREATE_TOPICS: Versions("CreateTopics", 2, 7),
    ApiKey.DELETE_TOPICS: Versions("DeleteTopics", 1, 6),
    ApiKey.INIT_PRODUCER_ID: Versions("InitProducerId", 0, 4),
    ApiKey.DESCRIBE_CONFIGS: Versions("DescribeConfigs", 1, 4),
    # -- admin changes to existing topics --
    ApiKey.CREATE_PARTITIONS: Versions("CreatePartitions", 0, 3),
    ApiKey.DELETE_RECORDS: Versions("DeleteRecords", 0, 2),
    ApiKey.ALTER_CONFIGS: Versions("AlterConfigs", 0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Versions("IncrementalAlterConfigs", 0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: Versions("DescribeLogDirs", 0, 4),
    ApiKey.DESCRIBE_CLUSTER: Versions("DescribeCluster", 0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Versions("AlterPartitionReassignments", 0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Versions("ListPartitionReassignments", 0, 0),
    # -- consumer groups (logserver/groups) --
    ApiKey.FIND_COORDINATOR: Versions("FindCoordinator", 0, 4),
    ApiKey.JOIN_GROUP: Versions("JoinGroup", 0, 9),
    ApiKey.SYNC_GROUP: Versions("SyncGroup", 0, 5),
    ApiKey.HEARTBEAT: Versions("Heartbeat", 0, 4),
    ApiKey.LEAVE_GROUP: Versions("LeaveGroup", 0, 5),
    ApiKey.OFFSET_COMMIT: Versions("OffsetCommit", 2, 9),
    ApiKey.OFFSET_FETCH: Versions("OffsetFetch", 1, 9),
    ApiKey.LIST_GROUPS: Versions("ListGroups", 0, 5),
    ApiKey.DESCRIBE_GROUPS: Versions("DescribeGroups", 0, 5),
    ApiKey.DELETE_GROUPS: Versions("DeleteGroups", 0, 2),
    ApiKey.OFFSET_DELETE: Versions("OffsetDelete", 0, 0),
    # -- the consumer group protocol, KIP-848 (logserver/groups/consumer) --
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Versions("ConsumerGroupHeartbeat", 0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Versions("ConsumerGroupDescribe", 0, 1),
    # -- ACLs (logserver/security) --
    ApiKey.DESCRIBE_ACLS: Versions("DescribeAcls", 0, 3),
    ApiKey.CREATE_ACLS: Versions("CreateAcls", 0, 3),
    ApiKey.DELETE_ACLS: Versions("DeleteAcls", 0, 3),
    # -- authentication (logserver/security) --
    ApiKey.SASL_HANDSHAKE: Versions("SaslHandshake", 0, 1),
    ApiKey.SASL_AUTHENTICATE: Versions("SaslAuthenticate", 0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Versions("DescribeUserScramCredentials", 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Versions("AlterUserScramCredentials", 0, 0),
    # -- transactions (logserver/transactions) --
    ApiKey.ADD_PARTITIONS_TO_TXN: Versions("AddPartitionsToTxn", 0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: Versions("AddOffsetsToTxn", 0, 3),
    ApiKey.END_TXN: Versions("EndTxn", 0, 3),
    ApiKey.TXN_OFFSET_COMMIT: Versions("TxnOffsetCommit", 0, 3),
    ApiKey.WRITE_TXN_MARKERS: Versions("WriteTxnMarkers", 0, 1),
    ApiKey.DESCRIBE_PRODUCERS: Versions("DescribeProducers", 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: Versions("DescribeTransactions", 0, 0),
    ApiKey.LIST_TRANSACTIONS: Versions("ListTransactions", 0, 1),
}

# Not advertised in ApiVersions: APIs brokers use only among themselves. Envelope: a REST
# Proxy's produce forwarded to the leader as its caller (logserver/handlers/envelope.py).
# OffsetForLeaderEpoch, which followers ask, is served to clients too (KIP-320).
UNADVERTISED: dict[int, Versions] = {
    ApiKey.ENVELOPE: Versions("Envelope", 0, 0),
}
