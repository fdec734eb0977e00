"""``logserver consume TOPIC...``: print records as they arrive, for quick checks.

Like kafka-console-consumer: from the end unless ``--from-beginning``, ``-n`` to stop
after that many records, ``--group`` to read as a member of a consumer group (committed
offsets first; the offsets of what was printed are committed, so ``group describe``
shows the lag of what is left). Values are printed raw, one per line; ``--json`` prints
one object per record with its partition, offset, timestamp, key and headers;
``--format`` takes kcat's format strings (consume_format.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.batch import iter_batches
from kafkaproto.messages import FetchRequest
from kafkaproto.records import Record, iter_records

from .client import Cluster
from .consume_format import compile_format
from .errors import CliError, kafka_error
from .group_member import GroupMember
from .offsets import EARLIEST, LATEST, TopicPartition, leaders_of, list_offsets
from .output import json_line

MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20
MAX_BYTES = 50 << 20
MAX_RECORD_BATCH_BYTES = 256 << 20  # the cap on a batch's decompressed size


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "consume", parents=[common], help="print records of topics",
        description="Print the records of TOPICs (kafka-console-consumer): new ones, or all "
        "with --from-beginning; as a group member with --group.")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the oldest record (with --group: where the group has no "
                   "committed offset)")
    p.add_argument("-n", "--num", "--max-messages", dest="num", type=int, metavar="N",
                   help="exit after N records")
    p.add_argument("-g", "--group", help="consume as a member of this consumer group, "
                   "committing what was printed")
    p.add_argument("-p", "--partition", type=int, metavar="N",
                   help="only this partition (not with --group)")
    p.add_argument("--offset", type=int, metavar="OFFSET",
                   help="start at this offset (with --partition)")
    p.add_argument("--timeout-ms", type=int, metavar="MS",
                   help="exit when no record arrived for MS milliseconds")
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.add_argument("-f", "--format", metavar="FMT",
                   help="print each record as kcat -f does: %%t topic, %%p partition, "
                   "%%o offset, %%T timestamp, %%k key, %%s value, %%K/%%S their lengths, "
                   "%%h headers (n=v,...), \\n newline; 'json' is --json")
    p.set_defaults(func=consume)


class _Printer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.json = args.json or args.format == "json"
        self.print_key = args.print_key
        self.format = (compile_format(args.format)
                       if args.format is not None and not self.json else None)
        self.count = 0

    def __call__(self, topic: str, partition: int, record: Record) -> None:
        self.count += 1
        if self.format is not None:
            sys.stdout.buffer.write(self.format(topic, partition, record))
            return
        if self.json:
            json_line({"topic": topic, "partition": partition, "offset": record.offset,
                       "timestamp": record.timestamp, "key": _text(record.key),
                       "value": _text(record.value),
                       "headers": {k: _text(v) for k, v in record.headers}})
            return
        out = sys.stdout.buffer
        if self.print_key:
            out.write(b"null" if record.key is None else bytes(record.key))
            out.write(b"\t")
        out.write(b"null" if record.value is None else bytes(record.value))
        out.write(b"\n")


def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "backslashreplace")


def consume(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise CliError("--partition and --offset cannot be used with --group", exit_code=2)
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition", exit_code=2)
    leaders = leaders_of(cluster, args.topics)
    printer = _Printer(args)
    member = GroupMember(cluster, args.group, args.topics) if args.group else None
    try:
        _run(cluster, args, leaders, printer, member)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a consume without -n ends: _run left the group
    finally:
        sys.stdout.flush()
        print(f"Processed a total of {printer.count} messages", file=sys.stderr)
    return 0


def _start_positions(cluster: Cluster, args: argparse.Namespace, leaders: dict[TopicPartition, int],
                     member: GroupMember | None) -> dict[TopicPartition, int]:
    """Where to start reading each partition."""
    committed = member.committed(list(leaders)) if member is not None else {}
    if args.offset is not None:
        return {tp: args.offset for tp in leaders}
    missing = {tp: leader for tp, leader in leaders.items() if tp not in committed}
    reset = list_offsets(cluster, missing, EARLIEST if args.from_beginning else LATEST) \
        if missing else {}
    return {**reset, **committed}


def _run(cluster: Cluster, args: argparse.Namespace, all_leaders: dict[TopicPartition, int],
         printer: _Printer, member: GroupMember | None) -> None:
    if member is not None:
        assigned = member.join()
    elif args.partition is not None:
        assigned = [tp for tp in all_leaders if tp[1] == args.partition]
        if not assigned:
            raise CliError(f"no partition {args.partition} in {', '.join(args.topics)}")
    else:
        assigned = sorted(all_leaders)
    leaders = {tp: all_leaders[tp] for tp in assigned if tp in all_leaders}
    positions = _start_positions(cluster, args, leaders, member)
    # Positions not committed yet: at first every assigned partition's, as Kafka's
    # consumer commits them all, so the lag counts partitions not read from yet.
    consumed: dict[TopicPartition, int] = dict(positions) if member is not None else {}
    last_record = time.monotonic()
    try:
        while args.num is None or printer.count < args.num:
            got = _fetch_round(cluster, args, leaders, positions, printer, consumed)
            now = time.monotonic()
            if got:
                last_record = now
            elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
            if member is None:
                continue
            stay = member.commit(consumed) if consumed else True
            consumed.clear()
            if stay and member.heartbeat_due():
                stay = member.heartbeat()
            if not stay:  # the group rebalanced: take our new share
                assigned = member.join()
                leaders = {tp: all_leaders[tp] for tp in assigned if tp in all_leaders}
                positions = _start_positions(cluster, args, leaders, member)
                consumed.update(positions)
    finally:
        if member is not None:
            if consumed:
                member.commit(consumed)
            member.leave()


def _fetch_round(cluster: Cluster, args: argparse.Namespace, leaders: dict[TopicPartition, int],
                 positions: dict[TopicPartition, int], printer: _Printer,
                 consumed: dict[TopicPartition, int]) -> int:
    """One Fetch per leader; prints what came back (up to -n); the records printed."""
    if not leaders:
        time.sleep(MAX_WAIT_MS / 1000)  # nothing assigned to us: just stay in the group
        return 0
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp, leader in sorted(leaders.items()):
        by_leader.setdefault(leader, []).append(tp)
    printed = 0
    for leader, tps in by_leader.items():
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=positions[(topic, partition)],
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES))
        request = FetchRequest(
            cluster_id=None, replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1,
            max_bytes=MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="")
        link = cluster.node(leader)
        response = link.ask(ApiKey.FETCH, request, ceiling=12,
                             timeout=link.timeout + MAX_WAIT_MS / 1000)
        if response.error_code:
            raise kafka_error("fetch", response.error_code)
        for topic_data in response.responses:
            for part in topic_data.partitions:
                tp = (topic_data.topic, part.partition_index)
                if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    reset = EARLIEST if args.from_beginning else LATEST
                    positions[tp] = list_offsets(cluster, {tp: leaders[tp]}, reset)[tp]
                    continue
                if part.error_code:
                    raise kafka_error(f"fetching {tp[0]}-{tp[1]}", part.error_code)
                if not part.records:
                    continue
                for record in iter_records(part.records,
                                           max_uncompressed_bytes=MAX_RECORD_BATCH_BYTES):
                    if record.offset < positions[tp]:
                        continue  # a batch starting before our position
                    if args.num is not None and printer.count >= args.num:
                        return printed
                    printer(tp[0], tp[1], record)
                    printed += 1
                    positions[tp] = consumed[tp] = record.offset + 1
                # Past what holds no record for us too (transaction markers), or the
                # same batch would come back for ever.
                ends = [header.next_offset for _, header in iter_batches(part.records)]
                if ends and ends[-1] > positions[tp]:
                    positions[tp] = consumed[tp] = ends[-1]
    return printed
