"""``logserver produce TOPIC``: each line of stdin becomes one record, for quick checks.

Like kafka-console-producer: keys with ``-k`` (one key for every record) or
``--key-separator`` (``KEY<sep>VALUE`` lines); a keyed record goes where Kafka's default
partitioner puts it (murmur2 of the key), unkeyed records of one run stick to one
partition. From a terminal each line is sent at once; from a pipe lines go in batches.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.batch import Compression
from kafkaproto.client import RetryPolicy
from kafkaproto.messages import ProduceRequest
from kafkaproto.murmur2 import partition_for
from kafkaproto.records import Header, build_batch

from .client import Cluster
from .errors import CliError, kafka_error
from .output import json_line

BATCH_LINES = 500
Line = tuple[bytes | None, bytes]  # key, value


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "produce", parents=[common], help="write stdin's lines to a topic",
        description="Write each line of stdin to TOPIC as one record (kafka-console-producer). "
        "Prints where each record landed.")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-k", "--key", help="the key of every record")
    p.add_argument("--key-separator", metavar="SEP",
                   help="split each line at the first SEP into key and value")
    p.add_argument("-p", "--partition", type=int, metavar="N",
                   help="write to this partition (default: by key, as Kafka's partitioner)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header on every record (repeatable)")
    p.add_argument("--acks", type=int, choices=(-1, 0, 1), default=-1,
                   help="acknowledgements to wait for (default -1: all in-sync replicas)")
    p.add_argument("--compression", choices=[c.name.lower() for c in Compression], default="none")
    p.set_defaults(func=produce)


def _lines(args: argparse.Namespace) -> Iterator[list[Line]]:
    """stdin's lines as (key, value), in batches (one line per batch from a terminal)."""
    size = 1 if sys.stdin.isatty() else BATCH_LINES
    fixed_key = args.key.encode() if args.key is not None else None
    batch: list[Line] = []
    for raw in sys.stdin.buffer:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        key = fixed_key
        if args.key_separator:
            sep = args.key_separator.encode()
            if sep not in line:
                raise CliError(f"line {line[:40]!r} has no key separator {args.key_separator!r}",
                               exit_code=2)
            key, line = line.split(sep, 1)
        batch.append((key, line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def produce(cluster: Cluster, args: argparse.Namespace) -> int:
    leaders = cluster.topic_partitions(args.topic, auto_create=True)
    if args.partition is not None and args.partition not in leaders:
        raise CliError(f"topic {args.topic!r} has no partition {args.partition} "
                       f"(it has {len(leaders)})")
    headers: list[Header] = []
    for h in args.header:
        name, sep, value = h.partition("=")
        if not sep:
            raise CliError(f"--header expects KEY=VALUE, got {h!r}", exit_code=2)
        headers.append((name, value.encode()))
    sticky = random.randrange(len(leaders))
    compression = Compression[args.compression.upper()]
    for lines in _lines(args):
        by_partition: dict[int, list[Line]] = {}
        for key, value in lines:
            if args.partition is not None:
                partition = args.partition
            elif key is not None:
                partition = partition_for(key, len(leaders))
            else:
                partition = sticky
            by_partition.setdefault(partition, []).append((key, value))
        for partition, records in by_partition.items():
            base = _send(cluster, args, leaders[partition], partition, records, headers, compression)
            for i in range(len(records)):
                offset = None if base is None else base + i
                if args.json:
                    json_line({"topic": args.topic, "partition": partition, "offset": offset})
                else:
                    where = "" if offset is None else f" at offset {offset}"
                    sys.stdout.write(f"Produced to partition {partition}{where}\n")
        sys.stdout.flush()
    return 0


def _send(cluster: Cluster, args: argparse.Namespace, leader: int, partition: int,
          records: list[Line], headers: list[Header], compression: Compression) -> int | None:
    """Write one batch; its base offset (None with acks=0). Retries retriable errors."""
    now = int(time.time() * 1000)
    batch = build_batch([(k, v, headers, now) for k, v in records], compression=compression)
    request = ProduceRequest(transactional_id=None, acks=args.acks, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=args.topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    link = cluster.node(leader)
    if args.acks == 0:
        link.send_only(ApiKey.PRODUCE, request, ceiling=9)
        return None
    policy = RetryPolicy(timeout_s=args.timeout)
    started, failures = time.monotonic(), 0
    while True:
        response = link.ask(ApiKey.PRODUCE, request, ceiling=9)
        (answer,) = response.responses[0].partition_responses
        if not answer.error_code:
            return int(answer.base_offset)
        failures += 1
        decision = policy.decide(answer.error_code, failures, time.monotonic() - started)
        if not decision.retry:
            raise kafka_error(f"producing to {args.topic}-{partition}", answer.error_code,
                              answer.error_message)
        time.sleep(decision.delay_s)
