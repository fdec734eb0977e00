"""Retained messages kept in a compacted topic of the log, so they survive restarts.

Record key = the MQTT topic, value = the payload, header ``mqtt.props`` = the forwarded
v5 properties as JSON, header ``mqtt.qos`` = the QoS it was published with (absent = 2:
records written before it was kept); a retained PUBLISH with an empty payload writes a tombstone
(null value), which deletes it, as MQTT says. At start-up the whole topic is read into
the in-memory ``RetainedStore``; afterwards the bridge follows the topic like a downlink
topic, so several bridges in front of one log share their retained messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from commonlib.kafkaclient import KafkaClient
from kafkaproto.records import Record

from .compacted import ensure_compacted_topic, read_records
from .kafka_producer import Producer

log = logging.getLogger(__name__)

PROPS_HEADER = "mqtt.props"
QOS_HEADER = "mqtt.qos"
_QOS_VALUES = (b"0", b"1", b"2")


def props_to_header(props: dict[str, Any] | None) -> bytes | None:
    """JSON of the forwarded properties; bytes values (correlation data) as hex."""
    if not props:
        return None
    out = {k: ({"hex": v.hex()} if isinstance(v, bytes | bytearray) else v) for k, v in props.items()}
    return json.dumps(out, separators=(",", ":")).encode()


def props_from_header(raw: bytes | None) -> dict[str, Any] | None:
    if not raw:
        return None
    d = json.loads(raw)
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and "hex" in v:
            out[k] = bytes.fromhex(v["hex"])
        elif k == "user_property":
            out[k] = [tuple(pair) for pair in v]
        else:
            out[k] = v
    return out


class RetainedLog:
    """Writes retained messages to ``topic`` and applies the topic's records to a store.

    ``apply(topic, payload, props, timestamp_ms, qos)`` (payload None = delete) is the
    in-memory side.
    """

    def __init__(
        self, client: KafkaClient, producer: Producer, topic: str,
        apply: Callable[[str, bytes | None, dict[str, Any] | None, int, int], None],
        max_message_bytes: int,
    ) -> None:
        self.client = client
        self.producer = producer
        self.topic = topic
        self.apply = apply
        self.max_message_bytes = max_message_bytes
        self._live_keys: set[bytes] = set()
        #: key -> this bridge's writes not yet read back. Records of such a key are older
        #: than the value already in memory (ours, written last): they are skipped, so a
        #: late echo neither reverts a newer value nor counts against the retained limits.
        self._own: dict[bytes, int] = {}
        self._loaded = False
        self.failures = 0

    async def create(self) -> None:
        await ensure_compacted_topic(self.client, self.topic, 1, self.max_message_bytes)

    async def load(self) -> int:
        """Read the whole topic; keys the live follower already updated keep that value."""
        table = await read_records(self.client, self.topic)
        n = 0
        for key, r in table.items():
            if key in self._live_keys:
                continue
            self._apply_record(r)
            n += 1
        self._loaded = True
        self._live_keys.clear()
        log.info("retained messages: %d loaded from %s", n, self.topic)
        return n

    def on_records(self, records: list[Record]) -> None:
        """Live records of the topic (this bridge's own writes and other bridges')."""
        for r in records:
            if r.key is None:
                continue
            if not self._loaded:
                self._live_keys.add(r.key)
            if r.key in self._own:
                self._release(r.key)
                continue
            self._apply_record(r)

    def _release(self, key: bytes) -> None:
        n = self._own.get(key, 0) - 1
        if n > 0:
            self._own[key] = n
        else:
            self._own.pop(key, None)

    def _apply_record(self, r: Record) -> None:
        assert r.key is not None
        topic = r.key.decode("utf-8", "replace")
        if not r.value:
            self.apply(topic, None, None, -1, 2)
            return
        raw = None
        qos = 2
        for k, v in r.headers or ():
            if k == PROPS_HEADER:
                raw = v
            elif k == QOS_HEADER and v in _QOS_VALUES:
                qos = int(v)
        try:
            props = props_from_header(raw)
        except (ValueError, TypeError) as exc:
            log.error("retained message for %r: unreadable properties (%s)", topic, exc)
            props = None
        self.apply(topic, r.value, props, r.timestamp, qos)

    def write(self, topic: str, payload: bytes, props: dict[str, Any] | None, qos: int = 2) -> asyncio.Future[int]:
        headers: list[tuple[str, bytes | None]] = [(QOS_HEADER, _QOS_VALUES[qos])]
        raw = props_to_header(props)
        if raw is not None:
            headers.append((PROPS_HEADER, raw))
        key = topic.encode()
        self._own[key] = self._own.get(key, 0) + 1
        fut = self.producer.send(self.topic, key, payload or None, headers)
        fut.add_done_callback(lambda f: self._written(f, key))
        return fut

    def _written(self, fut: asyncio.Future[int], key: bytes) -> None:
        if fut.cancelled():
            self._release(key)
            return
        exc = fut.exception()
        if exc is not None:
            self._release(key)  # never read back
            self.failures += 1
            log.error("cannot store a retained message in %s: %s", self.topic, exc)
