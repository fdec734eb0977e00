"""Kafka error codes and the codec's own exceptions.

``ErrorCode`` mirrors Kafka's ``Errors`` enum (names in UPPER_SNAKE, as on the
wire docs) so handlers can write ``ErrorCode.NOT_COORDINATOR`` instead of magic
numbers. The exceptions are what the sans-I/O codec raises; the server turns
them into error responses or closes the connection.
"""

from __future__ import annotations

from enum import Enum, IntEnum

__all__ = [
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "RETRY",
    "ProtocolError",
    "Retry",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "is_retriable",
    "needs_metadata_refresh",
    "retry_for",
]


class ErrorCode(IntEnum):
    """Kafka protocol error codes (``org.apache.kafka.common.protocol.Errors``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    # Pre-2.6 Kafka name of code 6, still used by many client libraries.
    NOT_LEADER_FOR_PARTITION = 6


class Retry(Enum):
    """What a client may do about an error code (Kafka's exception hierarchy).

    Kafka marks an error retriable by making its exception a ``RetriableException``;
    those under ``InvalidMetadataException`` also say the client's metadata (leaders,
    topic ids) is stale and should be refreshed before the retry.
    """

    NEVER = "never"  # the same request gets the same answer
    RETRY = "retry"  # transient: retry after a backoff
    REFRESH_METADATA = "refresh_metadata"  # transient, and the metadata is stale


#: Every error code and what a client may do about it, as in Kafka's ``Errors.java``
#: (the exception class each code maps to, and whether that is a RetriableException).
RETRY: dict[ErrorCode, Retry] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: Retry.NEVER,
    ErrorCode.NONE: Retry.NEVER,
    ErrorCode.OFFSET_OUT_OF_RANGE: Retry.NEVER,
    ErrorCode.CORRUPT_MESSAGE: Retry.RETRY,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Retry.REFRESH_METADATA,
    ErrorCode.INVALID_FETCH_SIZE: Retry.NEVER,
    ErrorCode.LEADER_NOT_AVAILABLE: Retry.REFRESH_METADATA,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: Retry.REFRESH_METADATA,
    ErrorCode.REQUEST_TIMED_OUT: Retry.RETRY,
    ErrorCode.BROKER_NOT_AVAILABLE: Retry.NEVER,
    ErrorCode.REPLICA_NOT_AVAILABLE: Retry.REFRESH_METADATA,
    ErrorCode.MESSAGE_TOO_LARGE: Retry.NEVER,
    ErrorCode.STALE_CONTROLLER_EPOCH: Retry.NEVER,
    ErrorCode.OFFSET_METADATA_TOO_LARGE: Retry.NEVER,
    ErrorCode.NETWORK_EXCEPTION: Retry.REFRESH_METADATA,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: Retry.RETRY,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: Retry.RETRY,
    ErrorCode.NOT_COORDINATOR: Retry.RETRY,
    ErrorCode.INVALID_TOPIC_EXCEPTION: Retry.NEVER,
    ErrorCode.RECORD_LIST_TOO_LARGE: Retry.NEVER,
    ErrorCode.NOT_ENOUGH_REPLICAS: Retry.RETRY,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Retry.RETRY,
    ErrorCode.INVALID_REQUIRED_ACKS: Retry.NEVER,
    ErrorCode.ILLEGAL_GENERATION: Retry.NEVER,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: Retry.NEVER,
    ErrorCode.INVALID_GROUP_ID: Retry.NEVER,
    ErrorCode.UNKNOWN_MEMBER_ID: Retry.NEVER,
    ErrorCode.INVALID_SESSION_TIMEOUT: Retry.NEVER,
    ErrorCode.REBALANCE_IN_PROGRESS: Retry.NEVER,
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: Retry.NEVER,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: Retry.NEVER,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: Retry.NEVER,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: Retry.NEVER,
    ErrorCode.INVALID_TIMESTAMP: Retry.NEVER,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: Retry.NEVER,
    ErrorCode.ILLEGAL_SASL_STATE: Retry.NEVER,
    ErrorCode.UNSUPPORTED_VERSION: Retry.NEVER,
    ErrorCode.TOPIC_ALREADY_EXISTS: Retry.NEVER,
    ErrorCode.INVALID_PARTITIONS: Retry.NEVER,
    ErrorCode.INVALID_REPLICATION_FACTOR: Retry.NEVER,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: Retry.NEVER,
    ErrorCode.INVALID_CONFIG: Retry.NEVER,
    ErrorCode.NOT_CONTROLLER: Retry.RETRY,
    ErrorCode.INVALID_REQUEST: Retry.NEVER,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: Retry.NEVER,
    ErrorCode.POLICY_VIOLATION: Retry.NEVER,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: Retry.NEVER,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: Retry.NEVER,
    ErrorCode.INVALID_PRODUCER_EPOCH: Retry.NEVER,
    ErrorCode.INVALID_TXN_STATE: Retry.NEVER,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: Retry.NEVER,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: Retry.NEVER,
    ErrorCode.CONCURRENT_TRANSACTIONS: Retry.RETRY,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: Retry.NEVER,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Retry.NEVER,
    ErrorCode.SECURITY_DISABLED: Retry.NEVER,
    ErrorCode.OPERATION_NOT_ATTEMPTED: Retry.NEVER,
    ErrorCode.KAFKA_STORAGE_ERROR: Retry.REFRESH_METADATA,
    ErrorCode.LOG_DIR_NOT_FOUND: Retry.NEVER,
    ErrorCode.SASL_AUTHENTICATION_FAILED: Retry.NEVER,
    ErrorCode.UNKNOWN_PRODUCER_ID: Retry.NEVER,
    ErrorCode.REASSIGNMENT_IN_PROGRESS: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: Retry.NEVER,
    ErrorCode.DELEGATION_TOKEN_EXPIRED: Retry.NEVER,
    ErrorCode.INVALID_PRINCIPAL_TYPE: Retry.NEVER,
    ErrorCode.NON_EMPTY_GROUP: Retry.NEVER,
    ErrorCode.GROUP_ID_NOT_FOUND: Retry.NEVER,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND: Retry.RETRY,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: Retry.RETRY,
    ErrorCode.LISTENER_NOT_FOUND: Retry.REFRESH_METADATA,
    ErrorCode.TOPIC_DELETION_DISABLED: Retry.NEVER,
    ErrorCode.FENCED_LEADER_EPOCH: Retry.REFRESH_METADATA,
    ErrorCode.UNKNOWN_LEADER_EPOCH: Retry.RETRY,
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: Retry.NEVER,
    ErrorCode.STALE_BROKER_EPOCH: Retry.NEVER,
    ErrorCode.OFFSET_NOT_AVAILABLE: Retry.RETRY,
    ErrorCode.MEMBER_ID_REQUIRED: Retry.NEVER,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: Retry.REFRESH_METADATA,
    ErrorCode.GROUP_MAX_SIZE_REACHED: Retry.NEVER,
    ErrorCode.FENCED_INSTANCE_ID: Retry.NEVER,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: Retry.REFRESH_METADATA,
    ErrorCode.ELECTION_NOT_NEEDED: Retry.REFRESH_METADATA,
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: Retry.NEVER,
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: Retry.NEVER,
    ErrorCode.INVALID_RECORD: Retry.NEVER,
    ErrorCode.UNSTABLE_OFFSET_COMMIT: Retry.RETRY,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: Retry.RETRY,
    ErrorCode.PRODUCER_FENCED: Retry.NEVER,
    ErrorCode.RESOURCE_NOT_FOUND: Retry.NEVER,
    ErrorCode.DUPLICATE_RESOURCE: Retry.NEVER,
    ErrorCode.UNACCEPTABLE_CREDENTIAL: Retry.NEVER,
    ErrorCode.INCONSISTENT_VOTER_SET: Retry.NEVER,
    ErrorCode.INVALID_UPDATE_VERSION: Retry.NEVER,
    ErrorCode.FEATURE_UPDATE_FAILED: Retry.NEVER,
    ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE: Retry.NEVER,
    ErrorCode.SNAPSHOT_NOT_FOUND: Retry.NEVER,
    ErrorCode.POSITION_OUT_OF_RANGE: Retry.NEVER,
    ErrorCode.UNKNOWN_TOPIC_ID: Retry.REFRESH_METADATA,
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: Retry.NEVER,
    ErrorCode.BROKER_ID_NOT_REGISTERED: Retry.NEVER,
    ErrorCode.INCONSISTENT_TOPIC_ID: Retry.REFRESH_METADATA,
    ErrorCode.INCONSISTENT_CLUSTER_ID: Retry.NEVER,
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: Retry.NEVER,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: Retry.RETRY,
    ErrorCode.INELIGIBLE_REPLICA: Retry.NEVER,
    ErrorCode.NEW_LEADER_ELECTED: Retry.NEVER,
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: Retry.NEVER,
    ErrorCode.FENCED_MEMBER_EPOCH: Retry.NEVER,
    ErrorCode.UNRELEASED_INSTANCE_ID: Retry.NEVER,
    ErrorCode.UNSUPPORTED_ASSIGNOR: Retry.NEVER,
    ErrorCode.STALE_MEMBER_EPOCH: Retry.NEVER,
    ErrorCode.MISMATCHED_ENDPOINT_TYPE: Retry.NEVER,
    ErrorCode.UNSUPPORTED_ENDPOINT_TYPE: Retry.NEVER,
    ErrorCode.UNKNOWN_CONTROLLER_ID: Retry.NEVER,
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID: Retry.NEVER,
    ErrorCode.TELEMETRY_TOO_LARGE: Retry.NEVER,
    ErrorCode.INVALID_REGISTRATION: Retry.NEVER,
    ErrorCode.TRANSACTION_ABORTABLE: Retry.NEVER,
    ErrorCode.INVALID_RECORD_STATE: Retry.NEVER,
    ErrorCode.SHARE_SESSION_NOT_FOUND: Retry.RETRY,
    ErrorCode.INVALID_SHARE_SESSION_EPOCH: Retry.RETRY,
    ErrorCode.FENCED_STATE_EPOCH: Retry.NEVER,
    ErrorCode.INVALID_VOTER_KEY: Retry.NEVER,
    ErrorCode.DUPLICATE_VOTER: Retry.NEVER,
    ErrorCode.VOTER_NOT_FOUND: Retry.NEVER,
    ErrorCode.INVALID_REGULAR_EXPRESSION: Retry.NEVER,
    ErrorCode.REBOOTSTRAP_REQUIRED: Retry.NEVER,
    ErrorCode.STREAMS_INVALID_TOPOLOGY: Retry.NEVER,
    ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH: Retry.NEVER,
    ErrorCode.STREAMS_TOPOLOGY_FENCED: Retry.NEVER,
    ErrorCode.SHARE_SESSION_LIMIT_REACHED: Retry.RETRY,
}


def retry_for(code: int) -> Retry:
    """The table's entry; codes this table does not know are never retried (as Java does,
    which maps them to UNKNOWN_SERVER_ERROR)."""
    try:
        return RETRY[ErrorCode(code)]
    except ValueError:
        return Retry.NEVER


def is_retriable(code: int) -> bool:
    """Kafka's ``error.exception() instanceof RetriableException``."""
    return retry_for(code) is not Retry.NEVER


def needs_metadata_refresh(code: int) -> bool:
    """Kafka's ``instanceof InvalidMetadataException``: refresh metadata, then retry."""
    return retry_for(code) is Retry.REFRESH_METADATA


class ProtocolError(Exception):
    """Base of everything the codec raises about bytes on the wire."""


class DecodeError(ProtocolError):
    """Malformed input: truncation, bad lengths, invalid UTF-8 or varints.

    The peer sent something no version of Kafka would; the server should close
    the connection rather than guess.
    """


class EncodeError(ProtocolError):
    """A message object holds a value its wire type cannot carry.

    Raised instead of ``struct.error``/``AttributeError`` so callers can tell a
    bad value from a bug in the caller.
    """


class UnknownApiKeyError(ProtocolError):
    """The request names an API key this codec declares no messages for."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key


class UnsupportedVersionError(ProtocolError):
    """The API is known but the version lies outside the declared range."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"unsupported version {api_version} for api key {api_key}")
        self.api_key = api_key
        self.api_version = api_version
