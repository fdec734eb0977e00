"""Structure-aware network fuzzer: mutated real client requests on many connections.

``python -m fuzz.netfuzz --port P --topic T --partitions N --seconds S`` (a subprocess of
tests/integration/test_fuzz_network.py and benchmarks/fuzz_network.py, so it competes with the healthy
client for CPU but not for its interpreter) prints one JSON line of statistics at the end.

What it sends, on ``--connections`` concurrent connections, each a few pipelined requests
before it reconnects:

- Produce (v3-v9, acks 0/1/all) into the healthy client's own topic, carrying CRC-valid
  batches broken after the CRC was recomputed (tests/helpers/batchforge.py): record counts that
  disagree with the records, wrong offset deltas, key/value/header lengths that lie,
  null header keys, control and magic-1 batches, garbage "compressed" payloads and
  decompression bombs of every codec (tests/helpers/bombs.py). Every one of these must be refused:
  an acknowledgement (error code 0) is counted in ``accepted_invalid``. Byte-flipped
  batches (CRC recomputed) and valid ones are sent too; they may be accepted.
- Fetch, Metadata, ListOffsets and the group APIs built from fully populated samples of
  each served version, with fields mutated by type (boundary integers, long or foreign
  strings, arrays repeated up to 50 times, nulls); nothing that creates or deletes topics
  (CreateTopics only with validate_only), DeleteGroups/OffsetDelete (no group is healthy).
- Byte-level mutations of those frames (flips, truncation, garbage appended), with a
  consistent size prefix, always last on their connection (the server may close on them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import struct
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from helpers.batchforge import forge, raw_record, recrc
from helpers.bombs import zeros_bomb
from kafkaproto import ApiKey, ErrorCode, Message, decode_response, encode_request
from kafkaproto.batch import Compression
from kafkaproto.compression import compress
from kafkaproto.messages import ProduceRequest
from kafkaproto.records import build_batch

HOST = "127.0.0.1"
_SIZE = struct.Struct(">i")

#: Request APIs mutated field by field (none creates or deletes topics or groups' data).
FIELD_FUZZED = {
    ApiKey.FETCH: (4, 12), ApiKey.METADATA: (0, 12), ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.API_VERSIONS: (0, 3), ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5), ApiKey.OFFSET_COMMIT: (2, 8), ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.LIST_GROUPS: (0, 4), ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 4), ApiKey.DESCRIBE_CONFIGS: (1, 4),
    # validate_only is forced on: topic names and configs are checked, nothing is created
    ApiKey.CREATE_TOPICS: (2, 7),
    # the healthy client uses no group, so deleting groups or their offsets cannot touch it
    ApiKey.DELETE_GROUPS: (0, 2), ApiKey.OFFSET_DELETE: (0, 0),
}
_INT_RANGES = {"int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
               "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
               "int64": (-(2**63), 2**63 - 1)}


@dataclass
class Request:
    kind: str
    frame: bytes
    api_key: int
    version: int
    correlation_id: int
    expect_response: bool
    must_reject: bool = False


@dataclass
class Stats:
    frames: Counter[str] = field(default_factory=Counter)
    produce_errors: Counter[str] = field(default_factory=Counter)
    accepted_invalid: Counter[str] = field(default_factory=Counter)
    responses: int = 0
    closed_by_server: int = 0
    timeouts: int = 0
    connect_errors: int = 0
    connections: int = 0
    bytes_sent: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "frames": dict(self.frames), "frames_total": sum(self.frames.values()),
            "produce_errors": dict(self.produce_errors),
            "accepted_invalid": dict(self.accepted_invalid), "responses": self.responses,
            "closed_by_server": self.closed_by_server, "timeouts": self.timeouts,
            "connect_errors": self.connect_errors, "connections": self.connections,
            "bytes_sent": self.bytes_sent,
        }


def _records(rng: random.Random, n: int) -> list:
    return [(b"fuzz-%d" % rng.randrange(10**6), rng.randbytes(rng.randrange(0, 64)),
             [("h", b"x")] if rng.random() < 0.3 else [], 1_700_000_000_000 + i)
            for i in range(n)]


class BatchMutator:
    """CRC-valid hostile batches, labelled with whether the broker must refuse them."""

    def __init__(self, rng: random.Random, bomb_sizes: dict[Compression, int]) -> None:
        self.rng = rng
        # Built once: zeros that inflate past any message.max.bytes the server may use.
        self.bombs = {codec: zeros_bomb(codec, size) for codec, size in bomb_sizes.items()}
        self.kinds: list[tuple[str, bool]] = [
            ("count-high", True), ("count-low", True), ("offset-delta", True),
            ("key-length", True), ("value-length", True), ("header-count", True),
            ("header-null-key", True), ("record-too-long", True), ("control", True),
            ("garbage-compressed", True), ("bomb", True), ("flip", False),
            ("flip-compressed", False), ("valid", False), ("year-9999", False),
        ]

    def make(self) -> tuple[str, bytes, bool]:
        name, must_reject = self.rng.choice(self.kinds)
        return name, bytes(getattr(self, "_" + name.replace("-", "_"))()), must_reject

    def _payload(self, n: int) -> bytes:
        return bytes(build_batch(_records(self.rng, n)))[61:]

    def _count_high(self) -> bytearray:
        n = self.rng.randrange(1, 5)
        return forge(self._payload(n), record_count=n + self.rng.randrange(1, 1000))

    def _count_low(self) -> bytearray:
        n = self.rng.randrange(2, 6)
        return forge(self._payload(n), record_count=self.rng.randrange(1, n))

    def _offset_delta(self) -> bytearray:
        deltas = [0, self.rng.choice([0, 2, 7, -1, 2**31 - 1])]
        return forge(b"".join(raw_record(offset_delta=d) for d in deltas), record_count=2)

    def _key_length(self) -> bytearray:
        return forge(raw_record(offset_delta=0, key_length=self.rng.choice([-2, -7, 10**6])),
                     record_count=1)

    def _value_length(self) -> bytearray:
        return forge(raw_record(offset_delta=0, value_length=self.rng.choice([-3, 2**30])),
                     record_count=1)

    def _header_count(self) -> bytearray:
        return forge(raw_record(offset_delta=0, header_count=self.rng.choice([-1, 5, 2**30])),
                     record_count=1)

    def _header_null_key(self) -> bytearray:
        return forge(raw_record(offset_delta=0, headers=[(None, b"v")]), record_count=1)

    def _record_too_long(self) -> bytearray:
        return forge(raw_record(offset_delta=0, length_adjust=self.rng.randrange(1, 100)),
                     record_count=1)

    def _control(self) -> bytearray:
        return forge(self._payload(1), record_count=1, attributes=0x20)

    def _garbage_compressed(self) -> bytearray:
        codec = self.rng.choice([Compression.GZIP, Compression.LZ4, Compression.ZSTD])
        valid = compress(codec, self._payload(3))
        junk = bytearray(valid)
        for _ in range(self.rng.randrange(1, 8)):  # keep the magic: let the decoder choke
            junk[self.rng.randrange(4, len(junk))] ^= 1 << self.rng.randrange(8)
        if zlib.crc32(junk) == zlib.crc32(valid):
            junk += b"\x00"
        junk = junk[: self.rng.randrange(len(junk) // 2, len(junk) + 1)] + b"\x01trailing"
        return forge(bytes(junk), record_count=3, attributes=int(codec))

    def _bomb(self) -> bytearray:
        codec = self.rng.choice(list(self.bombs))
        return forge(self.bombs[codec], record_count=1, attributes=int(codec))

    def _flip(self, codec: Compression = Compression.NONE) -> bytearray:
        batch = bytearray(build_batch(_records(self.rng, self.rng.randrange(1, 6)),
                                      compression=codec))
        for _ in range(self.rng.randrange(1, 4)):
            pos = self.rng.randrange(21, len(batch))  # attributes onwards (length/CRC kept)
            batch[pos] ^= 1 << self.rng.randrange(8)
        return recrc(batch)

    def _flip_compressed(self) -> bytearray:
        return self._flip(self.rng.choice([Compression.GZIP, Compression.SNAPPY,
                                           Compression.LZ4, Compression.ZSTD]))

    def _valid(self) -> bytearray:
        codec = self.rng.choice(list(Compression))
        return bytearray(build_batch(_records(self.rng, self.rng.randrange(1, 20)),
                                     compression=codec))

    def _year_9999(self) -> bytearray:
        return bytearray(build_batch([(b"k", b"v", [], 253_402_300_799_000)]))


class FieldMutator:
    """Sample requests of every fuzzed API and version, fields mutated by their type."""

    def __init__(self, rng: random.Random, topic: str, partitions: int) -> None:
        from helpers.kafka_samples import sample
        from kafkaproto import API_SPECS

        self.rng = rng
        self.topic = topic
        self.partitions = partitions
        self.samples: list[tuple[int, int, Message]] = []
        for key, (lo, hi) in FIELD_FUZZED.items():
            spec = API_SPECS[key]
            for version in range(max(lo, spec.request.MIN_VERSION),
                                 min(hi, spec.request.MAX_VERSION) + 1):
                self.samples.append((int(key), version, sample(spec.request, version)))

    def make(self) -> tuple[int, int, Message]:
        key, version, template = self.rng.choice(self.samples)
        msg = type(template)(**{f.attr: getattr(template, f.attr) for f in template._fields})
        self._mutate(msg, version, depth=0)
        if key == ApiKey.METADATA and hasattr(msg, "allow_auto_topic_creation"):
            msg.allow_auto_topic_creation = False  # topic creation is not what this fuzzes
        if key == ApiKey.METADATA and version < 4 and msg.topics:
            for topic in msg.topics:  # v0-3 always auto-create: only name existing topics
                topic.name = self.topic
        if key == ApiKey.CREATE_TOPICS:
            msg.validate_only = True
        return key, version, msg

    def _mutate(self, obj: Any, version: int, depth: int) -> None:
        for f in obj._fields:
            if version not in f.versions:
                continue
            value = getattr(obj, f.attr)
            if f.is_array and value is not None:
                value = list(value)
                if f.is_struct:
                    value = [self._copy_struct(v) for v in value]
                    for v in value:
                        self._mutate(v, version, depth + 1)
                setattr(obj, f.attr, value)
            elif f.is_struct and value is not None:
                value = self._copy_struct(value)
                self._mutate(value, version, depth + 1)
                setattr(obj, f.attr, value)
            if self.rng.random() < 0.35:
                setattr(obj, f.attr, self._value(f, version, getattr(obj, f.attr)))

    @staticmethod
    def _copy_struct(value: Any) -> Any:
        return type(value)(**{f.attr: getattr(value, f.attr) for f in value._fields})

    def _value(self, f: Any, version: int, current: Any) -> Any:
        rng = self.rng
        if version in f.nullable and rng.random() < 0.15:
            return None
        if f.is_array:
            items = list(current or [])
            choice = rng.random()
            if choice < 0.3:
                return []
            if items and choice < 0.8:
                return items * rng.randrange(2, 50)  # the same entry many times
            return items
        t = f.type
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            return rng.choice([0, -1, 1, lo, hi, rng.randint(lo, hi), self.partitions,
                               rng.randrange(self.partitions)])
        if t == "bool":
            return not current
        if t == "string":
            return rng.choice(["", self.topic, "__consumer_offsets", "x" * rng.randrange(300),
                               "é✓" * rng.randrange(50), f"no-such-topic-{rng.randrange(9)}",
                               "../../" + self.topic, "a" * 249, "a" * 2000])
        if t == "bytes":
            return rng.randbytes(rng.randrange(0, 300))
        if t == "uuid":
            return rng.randbytes(16)
        if t == "float64":
            return rng.choice([0.0, -1.0, float("inf"), float("nan"), 1e308])
        if t == "records":
            return rng.randbytes(rng.randrange(0, 200))
        return current


class RequestSource:
    def __init__(self, rng: random.Random, topic: str, partitions: int,
                 bomb_sizes: dict[Compression, int]) -> None:
        self.rng = rng
        self.topic = topic
        self.partitions = partitions
        self.batches = BatchMutator(rng, bomb_sizes)
        self.fields = FieldMutator(rng, topic, partitions)
        self.correlation = 0

    def _frame(self, key: int, version: int, body: Message) -> tuple[int, bytes]:
        self.correlation = (self.correlation + 1) & 0x7FFFFFFF
        return self.correlation, encode_request(key, version, self.correlation, "netfuzz", body)

    def produce(self) -> Request:
        name, batch, must_reject = self.batches.make()
        version = self.rng.randrange(3, 10)
        acks = self.rng.choice([1, -1, 0])
        body = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                ProduceRequest.PartitionProduceData(
                    index=self.rng.randrange(self.partitions), records=batch)])])
        corr, frame = self._frame(ApiKey.PRODUCE, version, body)
        return Request(f"produce/{name}", frame, ApiKey.PRODUCE, version, corr, acks != 0,
                       must_reject)

    def other(self) -> Request | None:
        key, version, body = self.fields.make()
        try:
            corr, frame = self._frame(key, version, body)
        except Exception:  # noqa: BLE001  (a mutation the encoder refuses: try another)
            return None
        return Request(f"fields/{ApiKey(key).name.lower()}", frame, key, version, corr, True)

    def raw(self) -> Request:
        base = self.produce() if self.rng.random() < 0.3 else (self.other() or self.produce())
        body = bytearray(base.frame[4:])
        choice = self.rng.random()
        if choice < 0.5:
            for _ in range(self.rng.randrange(1, 10)):
                body[self.rng.randrange(len(body))] = self.rng.randrange(256)
        elif choice < 0.8:
            body = body[: self.rng.randrange(0, len(body))]
        else:
            body += self.rng.randbytes(self.rng.randrange(1, 64))
        return Request("bytes", _SIZE.pack(len(body)) + bytes(body), base.api_key, base.version,
                       base.correlation_id, False)

    def connection_script(self) -> list[Request]:
        out: list[Request] = []
        for _ in range(self.rng.randrange(1, 6)):
            req = self.produce() if self.rng.random() < 0.6 else self.other()
            if req is not None:
                out.append(req)
        if self.rng.random() < 0.25:
            out.append(self.raw())
        return out


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


def _tally(req: Request, frame: bytes, stats: Stats) -> None:
    stats.responses += 1
    if req.api_key != ApiKey.PRODUCE:
        return
    _, body = decode_response(ApiKey.PRODUCE, req.version, frame)
    for topic in body.responses:
        for part in topic.partition_responses:
            code = part.error_code
            stats.produce_errors[ErrorCode(code).name if code in ErrorCode._value2member_map_
                                 else str(code)] += 1
            if code == 0 and req.must_reject:
                stats.accepted_invalid[req.kind] += 1


async def _connection(port: int, source: RequestSource, stats: Stats, deadline: float,
                      response_timeout: float) -> None:
    while time.monotonic() < deadline:
        script = source.connection_script()
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            stats.connect_errors += 1
            await asyncio.sleep(0.1)
            continue
        stats.connections += 1
        try:
            for req in script:
                stats.frames[req.kind] += 1
                stats.bytes_sent += len(req.frame)
                writer.write(req.frame)
            await asyncio.wait_for(writer.drain(), response_timeout)
            by_corr = {r.correlation_id: r for r in script if r.expect_response}
            while by_corr:
                frame = await asyncio.wait_for(_read_frame(reader), response_timeout)
                (corr,) = _SIZE.unpack_from(frame)
                req = by_corr.pop(corr, None)
                if req is not None:
                    _tally(req, frame, stats)
        except asyncio.IncompleteReadError:
            stats.closed_by_server += 1
        except (ConnectionError, BrokenPipeError):
            stats.closed_by_server += 1
        except TimeoutError:
            stats.timeouts += 1
        finally:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 5)


async def fuzz(port: int, topic: str, partitions: int, seconds: float, connections: int,
               seed: int, bomb_sizes: dict[Compression, int],
               response_timeout: float = 15.0) -> Stats:
    rng = random.Random(seed)
    source = RequestSource(rng, topic, partitions, bomb_sizes)
    stats = Stats()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(_connection(port, source, stats, deadline, response_timeout)
                           for _ in range(connections)))
    return stats


#: Bombs small enough to fit a 1 MiB request, inflating far past message.max.bytes.
DEFAULT_BOMBS = {Compression.ZSTD: 1 << 30, Compression.GZIP: 64 << 20,
                 Compression.LZ4: 64 << 20, Compression.SNAPPY: 8 << 20}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="structure-aware Kafka network fuzzer")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    stats = asyncio.run(fuzz(args.port, args.topic, args.partitions, args.seconds,
                             args.connections, args.seed, DEFAULT_BOMBS))
    out = stats.to_json()
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
