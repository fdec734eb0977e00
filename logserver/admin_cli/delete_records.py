"""``logserver topic delete-records``: move partitions' log start offsets forward
(DeleteRecords, as kafka-delete-records does), sent to each partition's leader.

``TOPIC[:PARTITION]=OFFSET`` (every partition without ``:PARTITION``; offset -1 is the
high watermark: everything up to now), or kafka-delete-records' ``--offset-json-file``
(``{"partitions": [{"topic": ..., "partition": ..., "offset": ...}], "version": 1}``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import DeleteRecordsRequest

from .client import Cluster
from .errors import CliError, error_name
from .offsets import TopicPartition, leaders_of
from .output import emit, table

TIMEOUT_MS = 30_000


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("delete-records", parents=[common],
                       help="delete records before an offset (kafka-delete-records)",
                       description="Delete the records before OFFSET: the partition's log "
                       "start offset moves there (DeleteRecords). OFFSET -1 is the high "
                       "watermark (delete everything up to now).")
    p.add_argument("specs", nargs="*", metavar="TOPIC[:PARTITION]=OFFSET")
    p.add_argument("--offset-json-file", type=Path, metavar="FILE",
                   help="kafka-delete-records' JSON: {\"partitions\": [{\"topic\", "
                   "\"partition\", \"offset\"}], \"version\": 1}")
    p.set_defaults(func=delete_records)


def _wanted(cluster: Cluster, args: argparse.Namespace) -> dict[TopicPartition, int]:
    wanted: dict[TopicPartition, int] = {}
    if args.offset_json_file is not None:
        try:
            document = json.loads(args.offset_json_file.read_text())
            for entry in document["partitions"]:
                wanted[(str(entry["topic"]), int(entry["partition"]))] = int(entry["offset"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CliError(f"--offset-json-file {args.offset_json_file}: {exc}",
                           exit_code=2) from None
    for spec in args.specs:
        where, sep, offset_text = spec.rpartition("=")
        topic, colon, partition_text = where.partition(":")
        try:
            offset = int(offset_text)
            partitions = [int(partition_text)] if colon else None
        except ValueError:
            partitions, sep = None, ""
        if not sep or not topic:
            raise CliError(f"expected TOPIC[:PARTITION]=OFFSET, got {spec!r}", exit_code=2)
        for partition in partitions if partitions is not None else sorted(
                p for _, p in leaders_of(cluster, [topic])):
            wanted[(topic, partition)] = offset
    if not wanted:
        raise CliError("nothing to delete: give TOPIC[:PARTITION]=OFFSET or "
                       "--offset-json-file", exit_code=2)
    return wanted


def delete_records(cluster: Cluster, args: argparse.Namespace) -> int:
    wanted = _wanted(cluster, args)
    leaders = leaders_of(cluster, sorted({t for t, _ in wanted}))
    missing = sorted(tp for tp in wanted if tp not in leaders)
    if missing:
        raise CliError(f"no partition {missing[0][1]} in topic {missing[0][0]!r}")
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in sorted(wanted):
        by_leader.setdefault(leaders[tp], []).append(tp)
    rows: list[dict[str, Any]] = []
    for leader, tps in sorted(by_leader.items()):
        topics: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(DeleteRecordsRequest.DeleteRecordsPartition(
                partition_index=partition, offset=wanted[(topic, partition)]))
        request = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name=t, partitions=ps) for t, ps in topics.items()], timeout_ms=TIMEOUT_MS)
        response = cluster.node(leader).ask(ApiKey.DELETE_RECORDS, request, ceiling=2)
        for t in response.topics:
            for p in t.partitions:
                rows.append({"topic": t.name, "partition": p.partition_index,
                             "low_watermark": p.low_watermark if not p.error_code else None,
                             "error": error_name(p.error_code) if p.error_code else None})
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "low-watermark", "error"],
        [[r["topic"], r["partition"], r["low_watermark"], r["error"]] for r in rows]))
    for r in rows:
        if r["error"]:
            print(f"logserver: delete-records {r['topic']}-{r['partition']}: {r['error']}",
                  file=sys.stderr)
    return 1 if any(r["error"] for r in rows) else 0
