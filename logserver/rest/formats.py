"""The proxy's embedded formats: JSON values or base64 binary, named by content type."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from logserver.rest.errors import UNPROCESSABLE, UNSUPPORTED_MEDIA_TYPE, RestError

V2 = "application/vnd.kafka.v2+json"
JSON = "json"
BINARY = "binary"
# Content type (parameters dropped) -> embedded format of keys and values.
_PRODUCE_TYPES = {
    "application/vnd.kafka.json.v2+json": JSON,
    "application/vnd.kafka.binary.v2+json": BINARY,
    "application/json": JSON,
}
_PLAIN_TYPES = frozenset({V2, "application/json", "application/vnd.kafka+json",
                          "application/octet-stream"})


def produce_format(content_type: str) -> str:
    """The embedded format a produce body's content type names (415 for the others)."""
    found = _PRODUCE_TYPES.get(_bare(content_type))
    if found is None:
        raise RestError(415, UNSUPPORTED_MEDIA_TYPE,
                        f"HTTP 415 Unsupported Media Type: {content_type or 'none'} (use "
                        "application/vnd.kafka.json.v2+json or application/vnd.kafka.binary.v2+json)")
    return found


def check_plain(content_type: str, has_body: bool) -> None:
    """Requests whose body is the proxy's own JSON (consumers, offsets): v2 or JSON."""
    if has_body and _bare(content_type) not in _PLAIN_TYPES:
        raise RestError(415, UNSUPPORTED_MEDIA_TYPE,
                        f"HTTP 415 Unsupported Media Type: {content_type or 'none'} "
                        f"(use {V2})")


def accepted_format(accept: str, default: str = BINARY) -> str:
    """The embedded format an Accept header asks records in."""
    for part in accept.split(","):
        bare = _bare(part)
        if bare == "application/vnd.kafka.json.v2+json":
            return JSON
        if bare == "application/vnd.kafka.binary.v2+json":
            return BINARY
    return default


def response_type(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


def encode(fmt: str, value: Any, what: str) -> bytes | None:
    """A key or value of a produce request as record bytes (None stays null)."""
    if value is None:
        return None
    if fmt == JSON:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if not isinstance(value, str):
        raise RestError(422, UNPROCESSABLE, f"{what} must be a base64 string in binary format")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise RestError(422, UNPROCESSABLE, f"{what} is not valid base64") from None


def decode(fmt: str, data: bytes | None) -> Any:
    """Record bytes as the proxy shows them: base64, or the JSON they hold."""
    if data is None:
        return None
    if fmt == BINARY:
        return base64.b64encode(data).decode()
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise RestError(422, UNPROCESSABLE, "record is not JSON: consume it in binary format") \
            from None


def parse_headers(value: Any, what: str) -> list[tuple[str, bytes | None]]:
    """A produce record's ``headers``: ``[{"name": str, "value": base64 or null}]``
    (Confluent v3's form; v2 has none), in order, names may repeat."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RestError(422, UNPROCESSABLE, f"{what} must be a list of {{name, value}}")
    found: list[tuple[str, bytes | None]] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise RestError(422, UNPROCESSABLE, f"{what}[{i}] needs a name")
        found.append((item["name"], encode(BINARY, item.get("value"), f"{what}[{i}].value")))
    return found


def headers_view(headers: list[tuple[str, bytes | None]]) -> list[dict[str, Any]]:
    return [{"name": name, "value": decode(BINARY, value)} for name, value in headers]


def _bare(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()
