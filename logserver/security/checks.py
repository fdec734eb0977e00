"""What each request needs, in one table, and the helpers handlers ask with.

Each rule is Kafka's check in KafkaApis: the resource type, the operation, and the
error code a refusal carries. Handlers name a rule and a resource and get back
``ErrorCode.NONE`` or the rule's error; they never talk to the authorizer themselves.
Without an authorizer (``authorizer.class.name`` unset) everything is allowed and
authorized-operations bitfields list every operation the resource supports, as Kafka does.

The principal and the client address come from :mod:`logserver.request_context`, set by
the dispatcher for each request.

Brokers are trusted for inter-broker traffic, as Kafka's are: a request on the
inter-broker listener from a principal allowed CLUSTER_ACTION on the cluster (what
replica fetchers need) may also describe anything and read any topic's records, so the
cluster-wide admin views (admin/peers.py), which ask the brokers for groups, offsets,
configs and records there, need no further ACL for that principal. Only reads: such a
principal gets no WRITE, ALTER, DELETE or group membership it was not granted. (A
replica fetcher of that principal can already read every partition.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from logserver import request_context
from logserver.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bitfield,
)

if TYPE_CHECKING:
    from logserver.services import BrokerServices

__all__ = ["Rule", "allowed", "allowed_any", "authorized_operations", "denied", "from_broker"]

_T, _G, _C, _X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                  ResourceType.TRANSACTIONAL_ID)
_Op = AclOperation
_TOPIC_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_GROUP_FAILED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_CLUSTER_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@dataclass(frozen=True, slots=True)
class Rule:
    resource_type: ResourceType
    operation: AclOperation
    error: int


# -- the table: API -> what it needs (Kafka's KafkaApis) --------------------------------
# Idempotent batches need nothing more: since Kafka 3.0 (KIP-679) Produce checks only WRITE
# on the topic; the producer id itself was granted by InitProducerId's check below.
PRODUCE = Rule(_T, _Op.WRITE, _TOPIC_FAILED)
FETCH = Rule(_T, _Op.READ, _TOPIC_FAILED)
FETCH_FOLLOWER = Rule(_C, _Op.CLUSTER_ACTION, _TOPIC_FAILED)  # a replica id: brokers only
LIST_OFFSETS = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)
# OffsetForLeaderEpoch: CLUSTER_ACTION (brokers) allows every topic, else DESCRIBE per
# topic (KIP-320: consumers validate their position after a leader change).
OFFSET_FOR_LEADER_EPOCH_CLUSTER = Rule(_C, _Op.CLUSTER_ACTION, _TOPIC_FAILED)
OFFSET_FOR_LEADER_EPOCH_TOPIC = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)
METADATA_TOPIC = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)  # others are left out of "all topics"
METADATA_CLUSTER = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)  # for cluster authorized ops
AUTO_CREATE_CLUSTER = Rule(_C, _Op.CREATE, _CLUSTER_FAILED)  # either this ...
AUTO_CREATE_TOPIC = Rule(_T, _Op.CREATE, _TOPIC_FAILED)  # ... or this, per topic
CREATE_TOPICS_CLUSTER = Rule(_C, _Op.CREATE, _CLUSTER_FAILED)
CREATE_TOPICS_TOPIC = Rule(_T, _Op.CREATE, _TOPIC_FAILED)
CREATE_TOPICS_CONFIGS = Rule(_T, _Op.DESCRIBE_CONFIGS, _TOPIC_FAILED)  # configs in the answer
DELETE_TOPICS = Rule(_T, _Op.DELETE, _TOPIC_FAILED)
DELETE_TOPICS_BY_ID = Rule(_T, _Op.DESCRIBE, ErrorCode.UNKNOWN_TOPIC_ID)
DESCRIBE_TOPIC_CONFIGS = Rule(_T, _Op.DESCRIBE_CONFIGS, _TOPIC_FAILED)
DESCRIBE_BROKER_CONFIGS = Rule(_C, _Op.DESCRIBE_CONFIGS, _CLUSTER_FAILED)
INIT_PRODUCER_ID = Rule(_C, _Op.IDEMPOTENT_WRITE, _CLUSTER_FAILED)  # or WRITE on any topic
TRANSACTIONAL_ID_WRITE = Rule(_X, _Op.WRITE, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
FIND_GROUP_COORDINATOR = Rule(_G, _Op.DESCRIBE, _GROUP_FAILED)
FIND_TXN_COORDINATOR = Rule(_X, _Op.DESCRIBE, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
JOIN_GROUP = SYNC_GROUP = HEARTBEAT = LEAVE_GROUP = Rule(_G, _Op.READ, _GROUP_FAILED)
# KIP-848: ConsumerGroupHeartbeat needs what JoinGroup needs, and DESCRIBE on each
# subscribed topic name (Kafka 4.x); ConsumerGroupDescribe is DESCRIBE_GROUPS.
CONSUMER_GROUP_HEARTBEAT = Rule(_G, _Op.READ, _GROUP_FAILED)
CONSUMER_GROUP_HEARTBEAT_TOPIC = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)
OFFSET_COMMIT_GROUP = Rule(_G, _Op.READ, _GROUP_FAILED)
OFFSET_COMMIT_TOPIC = Rule(_T, _Op.READ, _TOPIC_FAILED)
OFFSET_FETCH_GROUP = Rule(_G, _Op.DESCRIBE, _GROUP_FAILED)
OFFSET_FETCH_TOPIC = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)
DESCRIBE_GROUPS = Rule(_G, _Op.DESCRIBE, _GROUP_FAILED)
LIST_GROUPS_CLUSTER = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)  # all groups, else ...
LIST_GROUPS_GROUP = Rule(_G, _Op.DESCRIBE, _GROUP_FAILED)  # ... those described this way
DELETE_GROUPS = Rule(_G, _Op.DELETE, _GROUP_FAILED)
OFFSET_DELETE_GROUP = Rule(_G, _Op.DELETE, _GROUP_FAILED)
OFFSET_DELETE_TOPIC = Rule(_T, _Op.READ, _TOPIC_FAILED)
DESCRIBE_ACLS = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)
CREATE_ACLS = DELETE_ACLS = Rule(_C, _Op.ALTER, _CLUSTER_FAILED)
# Admin changes to topics and the broker (handlers/alter_configs, create_partitions, ...):
CREATE_PARTITIONS = Rule(_T, _Op.ALTER, _TOPIC_FAILED)
DELETE_RECORDS = Rule(_T, _Op.DELETE, _TOPIC_FAILED)
ALTER_TOPIC_CONFIGS = Rule(_T, _Op.ALTER_CONFIGS, _TOPIC_FAILED)
ALTER_BROKER_CONFIGS = Rule(_C, _Op.ALTER_CONFIGS, _CLUSTER_FAILED)
DESCRIBE_CLUSTER = DESCRIBE_LOG_DIRS = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)
ALTER_PARTITION_REASSIGNMENTS = Rule(_C, _Op.ALTER, _CLUSTER_FAILED)
LIST_PARTITION_REASSIGNMENTS = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)
DESCRIBE_USER_SCRAM_CREDENTIALS = Rule(_C, _Op.DESCRIBE, _CLUSTER_FAILED)
ALTER_USER_SCRAM_CREDENTIALS = Rule(_C, _Op.ALTER, _CLUSTER_FAILED)
# Transactions: every call of a transactional producer (Produce of transactional batches,
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit) first needs
# TRANSACTIONAL_ID_WRITE; the producer id is implied by it.
TXN_ADD_PARTITIONS = Rule(_T, _Op.WRITE, _TOPIC_FAILED)  # + TRANSACTIONAL_ID_WRITE
TXN_OFFSET_COMMIT_GROUP = Rule(_G, _Op.READ, _GROUP_FAILED)  # AddOffsetsToTxn, TxnOffsetCommit
TXN_OFFSET_COMMIT_TOPIC = Rule(_T, _Op.READ, _TOPIC_FAILED)  # TxnOffsetCommit, per topic
WRITE_TXN_MARKERS = Rule(_C, _Op.CLUSTER_ACTION, _CLUSTER_FAILED)  # inter-broker (and admin abort)
DESCRIBE_TRANSACTIONS = Rule(_X, _Op.DESCRIBE, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
DESCRIBE_TRANSACTIONS_TOPIC = Rule(_T, _Op.DESCRIBE, _TOPIC_FAILED)  # others left out, no error
LIST_TRANSACTIONS = DESCRIBE_TRANSACTIONS  # ids the principal may not describe are left out
DESCRIBE_PRODUCERS = Rule(_T, _Op.READ, _TOPIC_FAILED)


def _who() -> tuple[str, str]:
    return request_context.principal.get(), request_context.client_host.get().lstrip("/")


# What a broker (CLUSTER_ACTION, on the inter-broker listener) may do without an ACL.
_BROKER_READS = frozenset({(_T, _Op.DESCRIBE), (_G, _Op.DESCRIBE), (_C, _Op.DESCRIBE),
                           (_T, _Op.DESCRIBE_CONFIGS), (_C, _Op.DESCRIBE_CONFIGS),
                           (_T, _Op.READ)})


def _inter_broker_listener(broker: BrokerServices) -> str:
    """The listener name followers fetch on (node.py's own_info picks the same one)."""
    named: str | None = broker.config["inter.broker.listener.name"]
    return named if named is not None else broker.config.advertised[0].name


def _as_broker(broker: BrokerServices, rule: Rule) -> bool:
    """Is this a read a broker may do, asked by a broker (see the module's docstring)?"""
    authorizer = broker.authorizer
    if authorizer is None or not broker.routing.replicated \
            or (rule.resource_type, rule.operation) not in _BROKER_READS \
            or request_context.listener_name.get() != _inter_broker_listener(broker):
        return False
    principal, host = _who()
    return authorizer.authorize(principal, host, _Op.CLUSTER_ACTION, _C, CLUSTER_NAME)


def from_broker(broker: BrokerServices) -> bool:
    """Is the current request a broker's: on the inter-broker listener, from a principal
    allowed CLUSTER_ACTION on the cluster (what an Envelope needs, handlers/envelope.py)?"""
    if request_context.listener_name.get() != _inter_broker_listener(broker):
        return False
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    principal, host = _who()
    return authorizer.authorize(principal, host, _Op.CLUSTER_ACTION, _C, CLUSTER_NAME)


def allowed(broker: BrokerServices, rule: Rule, name: str = CLUSTER_NAME) -> bool:
    """May the current request's principal do what ``rule`` names on resource ``name``?"""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    principal, host = _who()
    return authorizer.authorize(principal, host, rule.operation, rule.resource_type, name) \
        or _as_broker(broker, rule)


def denied(broker: BrokerServices, rule: Rule, name: str = CLUSTER_NAME) -> int:
    """``ErrorCode.NONE`` when allowed, else the rule's *_AUTHORIZATION_FAILED code."""
    return ErrorCode.NONE if allowed(broker, rule, name) else rule.error


def allowed_any(broker: BrokerServices, rule: Rule) -> bool:
    """Is the operation allowed on at least one resource of the rule's type (Kafka's
    authorizeByResourceType)?"""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    principal, host = _who()
    return authorizer.authorize_by_resource_type(principal, host, rule.operation,
                                                 rule.resource_type)


def authorized_operations(broker: BrokerServices, resource_type: ResourceType, name: str) -> int:
    """Kafka's authorized-operations bitfield of a resource for the current principal."""
    authorizer = broker.authorizer
    if authorizer is None:
        return operations_bitfield(list(SUPPORTED_OPERATIONS[resource_type]))
    principal, host = _who()
    return authorizer.authorized_operations(principal, host, resource_type, name)
