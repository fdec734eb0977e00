"""MQTT 5 message properties <-> Kafka record headers (request/response across the log).

A device's request (PUBLISH with Response Topic and Correlation Data) becomes a record
whose headers carry both, so a service reading the log knows where to answer and how
the device will recognise the answer; a record written to a downlink topic with those
headers reaches the device with the properties set again. Content Type and the Payload
Format Indicator travel the same way. Every other header is a v5 User Property, as
before. Correlation data is binary and stays binary; the others are UTF-8.

The ``mqtt.`` header namespace is the bridge's own: ``mqtt.client_id`` and ``mqtt.topic``
say which device wrote a record. A device's User Property in that namespace (any case)
is stored under ``user.`` + its name, so it can neither add a second identity header
nor shadow the bridge's (Java's ``Headers.lastHeader()`` and a ``dict()`` of the headers
take the last one).
"""

from __future__ import annotations

from typing import Any

from kafkaproto.records import Record

RESPONSE_TOPIC = "mqtt.response_topic"
CORRELATION_DATA = "mqtt.correlation_data"
CONTENT_TYPE = "mqtt.content_type"
PAYLOAD_FORMAT = "mqtt.payload_format"

RESERVED_PREFIX = "mqtt."
USER_PREFIX = "user."

#: header name -> (v5 property, is binary)
_TO_PROPERTY: dict[str, tuple[str, bool]] = {
    RESPONSE_TOPIC: ("response_topic", False),
    CORRELATION_DATA: ("correlation_data", True),
    CONTENT_TYPE: ("content_type", False),
}


def user_property_header(name: str) -> str:
    """The header name a device's User Property is stored under (see the module's note)."""
    return USER_PREFIX + name if name[:5].lower() == RESERVED_PREFIX else name


def property_headers(props: dict[str, Any]) -> list[tuple[str, bytes | None]]:
    """Headers for the request/response properties of an uplink PUBLISH (may be empty)."""
    out: list[tuple[str, bytes | None]] = []
    v = props.get("response_topic")
    if v is not None:
        out.append((RESPONSE_TOPIC, v.encode()))
    v = props.get("correlation_data")
    if v is not None:
        out.append((CORRELATION_DATA, bytes(v)))
    v = props.get("content_type")
    if v is not None:
        out.append((CONTENT_TYPE, v.encode()))
    v = props.get("payload_format_indicator")
    if v is not None:
        out.append((PAYLOAD_FORMAT, str(int(v)).encode()))
    return out


def record_properties(r: Record) -> dict[str, Any] | None:
    """The v5 PUBLISH properties of a downlink record: its mapped headers as properties,
    every other header as a User Property; None when it has no headers."""
    if not r.headers:
        return None
    props: dict[str, Any] = {}
    pairs: list[tuple[str, str]] = []
    for k, v in r.headers:
        if v is None:
            continue
        known = _TO_PROPERTY.get(k)
        if known is not None:
            name, binary = known
            props[name] = bytes(v) if binary else v.decode("utf-8", "replace")
        elif k == PAYLOAD_FORMAT:
            if v in (b"0", b"1"):
                props["payload_format_indicator"] = int(v)
        else:
            pairs.append((k, v.decode("utf-8", "replace")))
    if pairs:
        props["user_property"] = pairs
    return props or None
