"""What a command reports when it fails: one line and an exit code.

Exit codes (documented in ``logserver --help`` and docs/cli.md):
0 done; 1 the server refused or failed the operation (unknown topic, group not empty...);
2 bad usage (an unknown option, a malformed value); 3 the server cannot be reached or
answered with something that is not Kafka.
"""

from __future__ import annotations

from kafkaproto.errors import ErrorCode

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class CliError(Exception):
    """A failure to report as ``logserver: <message>`` and exit with ``exit_code``."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ServerUnreachable(CliError):
    """No connection, no answer, or an answer that is not Kafka."""

    exit_code = EXIT_UNREACHABLE


def error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_TOPIC_OR_PARTITION``), or the number."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def kafka_error(context: str, code: int, message: str | None = None) -> CliError:
    """``context: NAME (detail)`` for an error code in a response."""
    detail = f" ({message})" if message else ""
    return CliError(f"{context}: {error_name(code)}{detail}")
