"""The REST Proxy's error format: ``{"error_code": 40401, "message": ...}``."""

from __future__ import annotations

from kafkaproto import ErrorCode

# Confluent's error codes (io.confluent.kafkarest.Errors and rest-utils).
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
UNAUTHORIZED = 40101
FORBIDDEN = 40301
CONSUMER_ALREADY_EXISTS = 40902
UNSUPPORTED_MEDIA_TYPE = 415
UNPROCESSABLE = 422
BAD_REQUEST = 400
TOO_LARGE = 413
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003

# Kafka errors a producer retries (Confluent answers them as 50003, others as 50002).
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})


class RestError(Exception):
    """Answered as the proxy's JSON error with ``status``; ``error_code`` is Confluent's."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def kafka_error_code(error: int) -> int:
    """The proxy's code for a Kafka error on one record or partition."""
    return KAFKA_RETRIABLE_ERROR if error in _RETRIABLE else KAFKA_ERROR


def kafka_error_name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return f"error {error}"


def from_kafka(error: int, what: str) -> RestError:
    """A whole-request Kafka error as the proxy's error."""
    if error in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
        return RestError(403, FORBIDDEN, f"Not authorized to access {what}")
    if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, TOPIC_NOT_FOUND, f"{what} not found")
    status = 503 if error in _RETRIABLE else 500
    return RestError(status, kafka_error_code(error), f"{what}: {kafka_error_name(error)}")
