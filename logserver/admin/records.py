"""The console's topic browser: a page of records of one partition, from an offset or
the first offset at or after a timestamp, read from the partition's leader with a
consumer's Fetch (up to the high watermark, control records left out).

Each key and value is shown as JSON, text or hex (``auto`` picks JSON if it parses,
text if it is UTF-8, else hex) and cut at ``max_value_bytes``, so a page of large
records stays small; the original size is said beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkaproto.records import iter_records
from logserver.admin import peers

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

FETCH_VERSION = 12
MAX_LIMIT = 500
DEFAULT_LIMIT = 20
DEFAULT_VALUE_BYTES = 4096
MAX_VALUE_BYTES = 1 << 20
FETCH_MAX_BYTES = 4 << 20
FORMATS = ("auto", "json", "text", "hex")
LATEST, EARLIEST = -1, -2  # ListOffsets timestamps
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


class BrowseError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Page:
    """What one browse request asks for."""

    topic: str
    partition: int
    offset: int | None
    timestamp: int | None
    limit: int
    max_value_bytes: int
    format: str

    @classmethod
    def parse(cls, topic: str, query: Any) -> Page:
        def number(name: str, default: int | None) -> int | None:
            raw = query.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise BrowseError(400, f"{name} must be an integer") from None
        fmt = query.get("format", "auto")
        if fmt not in FORMATS:
            raise BrowseError(400, f"format must be one of {', '.join(FORMATS)}")
        partition = number("partition", 0)
        limit = number("limit", DEFAULT_LIMIT)
        cap = number("max_value_bytes", DEFAULT_VALUE_BYTES)
        assert partition is not None and limit is not None and cap is not None
        offset, timestamp = number("offset", None), number("timestamp", None)
        if (not 0 <= partition <= INT32_MAX or not 1 <= limit <= MAX_LIMIT
                or not 0 <= cap <= MAX_VALUE_BYTES
                or (offset is not None and not 0 <= offset <= INT64_MAX)
                or (timestamp is not None and not 0 <= timestamp <= INT64_MAX)):
            raise BrowseError(400, f"partition, offset, timestamp >= 0, 1 <= limit <= "
                                   f"{MAX_LIMIT}, 0 <= max_value_bytes <= {MAX_VALUE_BYTES}")
        return cls(topic, partition, offset, timestamp, limit, cap, fmt)


def render(data: bytes | None, fmt: str, cap: int) -> dict[str, Any] | None:
    """A key or value for the page: its size, the format shown, and the (cut) text."""
    if data is None:
        return None
    shown = bytes(data[:cap])
    truncated = len(data) > cap
    text: str | None
    try:
        text = shown.decode()
    except UnicodeDecodeError:
        text = None  # (a cut may split a character: the hex is shown then)
    if fmt in ("auto", "json") and text is not None and not truncated:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        else:
            return {"size": len(data), "format": "json", "truncated": False,
                    "data": json.dumps(parsed, indent=2, ensure_ascii=False)}
    if fmt in ("auto", "text", "json") and text is not None:
        return {"size": len(data), "format": "text", "truncated": truncated, "data": text}
    return {"size": len(data), "format": "hex", "truncated": truncated, "data": shown.hex()}


def _leader_address(broker: WithCluster, topic: str, partition: int) -> peers.Address:
    cluster = broker.cluster
    if cluster is None:
        if broker.storage.high_watermark(topic, partition) is None:
            raise BrowseError(404, f"unknown partition {topic}-{partition}")
        return broker.advertised_address
    state = cluster.model.partition(topic, partition)
    if state is None:
        raise BrowseError(404, f"unknown partition {topic}-{partition}")
    address = peers.live_addresses(broker).get(state.leader)
    if address is None:
        raise BrowseError(503, f"{topic}-{partition} has no live leader (offline)")
    return address


def _list_offsets(page: Page, timestamp: int) -> peers.Request:
    return (ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=page.topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=page.partition, current_leader_epoch=-1,
                timestamp=timestamp)])]))


async def _start(broker: WithCluster, address: peers.Address, page: Page) -> int:
    """The offset to read from: the one asked within the log (below its start: the
    start; past its end: the end), else the first at or after the timestamp (the end
    when no record is that recent), else the log start."""
    asked = ([_list_offsets(page, page.timestamp)]
             if page.offset is None and page.timestamp is not None else [])
    answers = await peers.ask(broker, address, [_list_offsets(page, EARLIEST),
                                                _list_offsets(page, LATEST), *asked])
    found = []
    for answer in answers:
        assert isinstance(answer, ListOffsetsResponse)
        [result] = [p for t in answer.topics for p in t.partitions]
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise BrowseError(404, f"unknown partition {page.topic}-{page.partition}")
        if result.error_code != ErrorCode.NONE:
            raise BrowseError(502, f"ListOffsets: {ErrorCode(result.error_code).name}")
        found.append(int(result.offset))
    start, end = found[0], found[1]
    if page.offset is not None:
        return min(max(page.offset, start), end)
    if page.timestamp is not None:
        return end if found[2] < 0 else found[2]
    return start


async def browse(broker: WithCluster, page: Page) -> dict[str, Any]:
    """One page of records from the partition's leader."""
    address = _leader_address(broker, page.topic, page.partition)
    try:
        start = await _start(broker, address, page)
        [answer] = await peers.ask(broker, address, [(ApiKey.FETCH, FETCH_VERSION, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=page.topic, partitions=[
                FetchRequest.FetchPartition(
                    partition=page.partition, current_leader_epoch=-1, fetch_offset=start,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=FETCH_MAX_BYTES)])]))])
    except peers.PeerUnreachable as exc:
        raise BrowseError(503, f"the leader did not answer: {exc}") from exc
    assert isinstance(answer, FetchResponse)
    [data] = [p for t in answer.responses for p in t.partitions]
    if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # moved since: ask again
        raise BrowseError(503, f"offset {start} left {page.topic}-{page.partition} meanwhile")
    if data.error_code != ErrorCode.NONE:
        raise BrowseError(502, f"Fetch: {ErrorCode(data.error_code).name}")
    raw = data.records
    records: list[dict[str, Any]] = []
    if isinstance(raw, (bytes, bytearray, memoryview)):
        for record in iter_records(raw, max_uncompressed_bytes=FETCH_MAX_BYTES * 16):
            if record.offset < start:
                continue  # the batch began before the offset asked
            records.append({
                "offset": record.offset, "timestamp": record.timestamp,
                "key": render(record.key, page.format, page.max_value_bytes),
                "headers": [{"key": k, "value": render(v, page.format, page.max_value_bytes)}
                            for k, v in record.headers],
                "value": render(record.value, page.format, page.max_value_bytes)})
            if len(records) == page.limit:
                break
    next_offset = records[-1]["offset"] + 1 if records else start
    return {"topic": page.topic, "partition": page.partition, "start_offset": start,
            "next_offset": next_offset, "log_start_offset": data.log_start_offset,
            "high_watermark": data.high_watermark, "records": records}
