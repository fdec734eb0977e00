"""What a client raises: a Kafka error code in a response, or a broken connection."""

from __future__ import annotations

from ..errors import ErrorCode, is_retriable, needs_metadata_refresh

__all__ = ["KafkaConnectionError", "KafkaError"]


class KafkaError(Exception):
    """A Kafka error code in a response, or a failure to talk to a broker."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)

    @property
    def refresh_metadata(self) -> bool:
        return needs_metadata_refresh(self.code)


class KafkaConnectionError(KafkaError, ConnectionError):
    """The connection broke or could not be made (Kafka's NetworkException: retriable).

    Also a ``ConnectionError`` (an ``OSError``), so code that handles a dead socket
    handles a dead Kafka connection the same way.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.NETWORK_EXCEPTION)
