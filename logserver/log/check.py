"""``logserver check DIR`` and ``logserver repair DIR``: the start-up recovery, offline.

``check`` only reads. Unlike start-up (which, like Kafka, re-validates only what came
after the last recovery point), it verifies every batch's CRC in every segment, and every
entry of every index, and classifies each problem the way start-up recovery would:

- torn tail: damage with no valid batch after it (the end of a crash); start-up
  truncates it by itself;
- corrupt: damage with valid batches after it, in the same segment or later ones;
  start-up refuses to start (exit code 3) because repairing it loses data;
- index: a missing, untrimmed (unclean shutdown) or wrong index; rebuilt at start-up;
  the ``.txnindex`` too: its aborted transactions are recomputed from the markers and
  transactional batches of the whole partition and compared entry by entry;
- unreadable: a batch whose CRC is right but whose records are not (framing that does not
  match the header, or a compressed payload that does not inflate within
  ``CHECK_MAX_UNCOMPRESSED``); reported with where the first one is, never repaired (the
  server refuses such batches on produce since they were validated there).

``repair`` runs check, then the full recovery with data loss allowed (every segment
re-validated from offset 0, cut at the first bad batch, indexes rebuilt), writes the
clean-shutdown marker, and checks again. Exit codes: 0 clean / nothing to do, 1
problems found (check) or found and repaired (repair), 2 usage error or directory in use.
"""

from __future__ import annotations

import argparse
import logging
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    CorruptBatchError,
    InvalidRecordError,
    parse_header,
    verify_crc,
)
from kafkaproto.records import decode_batch
from logserver.cluster_meta import FILE_NAME as META_FILE
from logserver.cluster_meta import NodeIdMismatchError, stored_node_id
from logserver.log.errors import DataDirError, LogDirLockedError
from logserver.log.manager import lock_data_dir, read_topics_file
from logserver.log.segment import LOG_SUFFIX, find_valid_batch
from logserver.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxnEntry, parse_entries
from logserver.log.txn_index import COMMIT, CONTROL_KEY_SIZE, control_type

__all__ = ["CheckResult", "Problem", "check_data_dir", "main", "repair_data_dir"]

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_CHUNK = 1 << 20
# A compressed batch inflating past this is reported unreadable (decompression bombs).
CHECK_MAX_UNCOMPRESSED = 64 << 20


@dataclass(frozen=True)
class Problem:
    path: Path
    kind: str  # "torn tail", "corrupt", "index", "gap", "metadata", "unreadable", "node id"
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}: {self.detail}"


@dataclass
class CheckResult:
    problems: list[Problem] = field(default_factory=list)
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    unreadable_batches: int = 0

    @property
    def needs_data_loss(self) -> bool:
        return any(p.kind in ("corrupt", "gap") for p in self.problems)


@dataclass
class _SegmentScan:
    size_valid: int = 0
    next_offset: int = 0
    starts: dict[int, int] = field(default_factory=dict)  # position -> base offset
    max_timestamp: int = -1
    # (offset, producer id, control type or None for data) of each transactional batch
    txn_batches: list[tuple[int, int, int | None]] = field(default_factory=list)


def check_data_dir(data_dir: Path, node_id: int | None = None) -> CheckResult:
    """Verify every partition directory under ``data_dir`` (read-only), and with
    ``node_id`` that meta.properties was written by that node."""
    result = CheckResult()
    _check_meta(data_dir, node_id, result)
    topics_path = data_dir / "__topics.json"
    partition_dirs: list[Path] = []
    try:
        topics = read_topics_file(topics_path)
    except DataDirError as exc:
        result.problems.append(Problem(topics_path, "metadata", str(exc)))
        topics = {}
    for name, info in topics.items():
        for p in range(info.partitions):
            directory = data_dir / f"{name}-{p}"
            if directory.is_dir():
                partition_dirs.append(directory)
            # else: never written; its directory is made by the first append (lazily)
    for directory in partition_dirs:
        result.partitions += 1
        _check_partition(directory, result)
    return result


def _check_meta(data_dir: Path, node_id: int | None, result: CheckResult) -> None:
    """meta.properties: readable, and (``node_id`` given) this node's, as start-up
    requires (cluster_meta.py)."""
    path = data_dir / META_FILE
    try:
        stored = stored_node_id(data_dir)
    except (OSError, ValueError) as exc:
        result.problems.append(Problem(path, "node id", f"unreadable node.id: {exc}"))
        return
    if node_id is not None and stored is not None and stored != node_id:
        result.problems.append(Problem(path, "node id", str(
            NodeIdMismatchError(path, stored, node_id))))


def _check_partition(directory: Path, result: CheckResult) -> None:
    bases = sorted(
        int(p.name[: -len(LOG_SUFFIX)]) for p in directory.glob("*" + LOG_SUFFIX)
        if p.name[: -len(LOG_SUFFIX)].isdigit()
    )
    sizes = {b: (directory / f"{b:020d}{LOG_SUFFIX}").stat().st_size for b in bases}
    expected: int | None = None
    txns = _TxnReplay(complete=not bases or bases[0] == 0)
    for i, base in enumerate(bases):
        path = directory / f"{base:020d}{LOG_SUFFIX}"
        result.segments += 1
        data_follows = any(sizes[b] for b in bases[i + 1 :])
        if expected is not None and sizes[base] and base != expected:
            result.problems.append(Problem(
                path, "gap", f"segment starts at offset {base}, the previous one ends at {expected}"))
        scan = _scan_segment(path, base, data_follows, result)
        _check_offset_index(directory / f"{base:020d}.index", base, scan, sizes[base], result)
        _check_time_index(directory / f"{base:020d}.timeindex", base, scan, result)
        _check_txn_index(directory / f"{base:020d}{TXN_INDEX_SUFFIX}", scan, txns, sizes[base],
                         result)
        if sizes[base]:
            expected = scan.next_offset


def _scan_segment(path: Path, base: int, data_follows: bool, result: CheckResult) -> _SegmentScan:
    scan = _SegmentScan(next_offset=base)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        reason: str | None = None
        unreadable, first_unreadable = 0, None
        while pos < size:
            head = os.pread(fd, BATCH_HEADER_SIZE, pos)
            try:
                header = parse_header(head)
            except CorruptBatchError as exc:
                reason = f"bad batch header at position {pos}: {exc}"
                break
            if pos + header.size > size:
                reason = f"torn batch at position {pos}: {header.size} bytes declared, {size - pos} present"
                break
            if header.base_offset != scan.next_offset:
                reason = (f"batch at position {pos} has base offset {header.base_offset}, "
                          f"expected {scan.next_offset}")
                break
            data = os.pread(fd, header.size, pos)
            if header.last_offset_delta < 0 or not verify_crc(data, 0, header):
                reason = f"CRC mismatch in batch at position {pos} (offset {header.base_offset})"
                break
            try:  # every record decoded, as a client would (compacted batches have gaps)
                decode_batch(data, verify_crc=False, max_uncompressed_bytes=CHECK_MAX_UNCOMPRESSED)
            except (CorruptBatchError, InvalidRecordError, ValueError) as exc:  # CRC-valid, unreadable
                unreadable += 1
                if first_unreadable is None:
                    first_unreadable = f"batch at position {pos} (offset {header.base_offset}): {exc}"
            if header.is_transactional:
                ctype = (control_type(data[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + CONTROL_KEY_SIZE])
                         if header.is_control else None)
                scan.txn_batches.append((header.base_offset, header.producer_id, ctype))
            scan.starts[pos] = header.base_offset
            scan.max_timestamp = max(scan.max_timestamp, header.max_timestamp)
            scan.next_offset = header.next_offset
            pos += header.size
            result.batches += 1
        scan.size_valid = pos
        result.bytes += pos
        if first_unreadable is not None:
            result.unreadable_batches += unreadable
            result.problems.append(Problem(
                path, "unreadable", f"{unreadable} CRC-valid batches no client can read; the first: "
                f"{first_unreadable}"))
        if reason is not None:
            after = find_valid_batch(fd, pos + 1, size)
            lost = size - pos
            if after is None and not data_follows:
                result.problems.append(Problem(
                    path, "torn tail", f"{reason}; {lost} bytes to truncate, no valid batch after it"))
            else:
                where = (f"valid batch at position {after[0]} (offset {after[1]})" if after
                         else "later segments hold data")
                result.problems.append(Problem(
                    path, "corrupt", f"{reason}; repairing loses {lost} bytes here"
                    f"{' and all later segments' if data_follows else ''} ({where})"))
    finally:
        os.close(fd)
    return scan


def _check_offset_index(path: Path, base: int, scan: _SegmentScan, log_size: int,
                        result: CheckResult) -> None:
    if not path.exists():
        if log_size:
            result.problems.append(Problem(path, "index", "missing"))
        return
    raw = path.read_bytes()
    if len(raw) % _OFFSET_ENTRY.size:
        result.problems.append(Problem(path, "index", f"length {len(raw)} is not a multiple of 8"))
        return
    last_rel, last_pos = -1, -1
    for i in range(len(raw) // _OFFSET_ENTRY.size):
        rel, pos = _OFFSET_ENTRY.unpack_from(raw, i * _OFFSET_ENTRY.size)
        if i and rel == 0 and pos == 0:
            result.problems.append(Problem(
                path, "index", f"not trimmed: zero entries from entry {i} (unclean shutdown)"))
            return
        if i and (rel <= last_rel or pos <= last_pos):
            result.problems.append(Problem(path, "index", f"entry {i} ({rel}, {pos}) does not rise"))
            return
        if scan.starts.get(pos) != base + rel:
            result.problems.append(Problem(
                path, "index", f"entry {i} (offset {base + rel}, position {pos}) is not a batch start"))
            return
        last_rel, last_pos = rel, pos


def _check_time_index(path: Path, base: int, scan: _SegmentScan, result: CheckResult) -> None:
    if not path.exists():
        if scan.size_valid:
            result.problems.append(Problem(path, "index", "missing"))
        return
    raw = path.read_bytes()
    if len(raw) % _TIME_ENTRY.size:
        result.problems.append(Problem(path, "index", f"length {len(raw)} is not a multiple of 12"))
        return
    last_ts, last_rel = -1, -1
    for i in range(len(raw) // _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(raw, i * _TIME_ENTRY.size)
        if i and ts == 0 and rel == 0:
            result.problems.append(Problem(
                path, "index", f"not trimmed: zero entries from entry {i} (unclean shutdown)"))
            return
        if ts <= last_ts or rel < last_rel or base + rel >= max(scan.next_offset, base + 1):
            result.problems.append(Problem(path, "index", f"entry {i} ({ts}, offset {base + rel}) is wrong"))
            return
        last_ts, last_rel = ts, rel


class _TxnReplay:
    """Open transactions across a partition's segments, as the broker tracks them."""

    def __init__(self, *, complete: bool) -> None:
        self.complete = complete  # the log starts at 0: every transaction's start is known
        self.ongoing: dict[int, int] = {}

    def segment_entries(self, scan: _SegmentScan) -> list[tuple[AbortedTxnEntry, bool]]:
        """The entries a segment's ``.txnindex`` must hold, each with whether its first
        offset and LSO are known (its transaction began inside the scanned log)."""
        out: list[tuple[AbortedTxnEntry, bool]] = []
        for offset, pid, ctype in scan.txn_batches:
            if ctype is None:
                self.ongoing.setdefault(pid, offset)
                continue
            first = self.ongoing.pop(pid, None)
            if ctype == COMMIT:
                continue
            lso = next(iter(self.ongoing.values()), offset + 1)
            if first is not None:
                out.append((AbortedTxnEntry(pid, first, offset, lso), self.complete))
            elif not self.complete:  # it may have begun below the log start
                out.append((AbortedTxnEntry(pid, -1, offset, -1), False))
        return out


def _check_txn_index(path: Path, scan: _SegmentScan, txns: _TxnReplay, log_size: int,
                     result: CheckResult) -> None:
    wanted = txns.segment_entries(scan)
    if not path.exists():
        if log_size:
            result.problems.append(Problem(path, "index", "missing"))
        return
    try:
        entries = parse_entries(path.read_bytes())
    except ValueError as exc:
        result.problems.append(Problem(path, "index", str(exc)))
        return
    if not txns.complete:  # markers of transactions begun below the log start may have none
        by_marker = {entry.last_offset: entry for entry in entries}
        wanted = [(w, exact) for w, exact in wanted if exact or w.last_offset in by_marker]
    if len(entries) != len(wanted):
        result.problems.append(Problem(
            path, "index", f"{len(entries)} aborted transactions, the log has {len(wanted)}"))
        return
    for i, (entry, (want, exact)) in enumerate(zip(entries, wanted, strict=True)):
        same = entry == want if exact else (
            entry.producer_id == want.producer_id and entry.last_offset == want.last_offset)
        if not same:
            result.problems.append(Problem(
                path, "index", f"entry {i} {tuple(entry)}, the log says {tuple(want)}"))
            return


def repair_data_dir(data_dir: Path) -> list[str]:
    """Full recovery with data loss allowed; returns what it did (one line each).

    Raises LogDirLockedError if a server holds the directory.
    """
    from logserver.log.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, LogManager

    # Without the marker and the recovery points every segment is re-validated from
    # offset 0 with CRC checks, exactly as after an unclean stop with no checkpoint.
    manager_probe = lock_data_dir(data_dir)
    os.close(manager_probe)
    for name in (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE):
        (data_dir / name).unlink(missing_ok=True)
    manager = LogManager(data_dir, {"log.recovery.allow.data.loss": True})
    actions = list(manager.recovery_actions)
    manager.close()
    return actions


def _print_result(result: CheckResult) -> None:
    print(f"checked {result.partitions} partitions, {result.segments} segments, "
          f"{result.batches} batches, {result.bytes} bytes")
    for problem in result.problems:
        print(f"  {problem}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"logserver {argv[0] if argv else 'check'}",
        description="check: verify every segment (CRC, offsets) and index of a data "
        "directory, read-only. repair: check, then cut damaged data off and rebuild indexes "
        "(data after the damage is lost), then check again. Exit codes: 0 clean, 1 problems "
        "found (check) or repaired (repair), 2 usage error or directory in use.",
    )
    parser.add_argument("command", choices=["check", "repair"])
    parser.add_argument("data_dir", type=Path, metavar="DIR", help="the server's log.dirs")
    parser.add_argument("--node.id", dest="node_id", type=int, metavar="ID",
                        help="the node.id the server is configured with: flag a "
                        "meta.properties written by another node (start-up refuses it)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_CLEAN
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        print(f"logserver {args.command}: {data_dir} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "check":
        try:
            os.close(lock_data_dir(data_dir))
        except LogDirLockedError as exc:
            # A live server's active segment and untrimmed indexes would read as damage.
            print(f"logserver check: {exc}; stop the server first (a live directory has "
                  f"writes in progress)", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:
            print(f"logserver check: cannot lock {data_dir}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        result = check_data_dir(data_dir, args.node_id)
        _print_result(result)
        if not result.problems:
            print("clean")
            return EXIT_CLEAN
        if any(p.kind == "node id" for p in result.problems):
            print("start-up will refuse this directory: it is another node's (use that "
                  "node.id, or an empty data directory for a new node)")
        elif any(p.path.name == "__topics.json" for p in result.problems):
            print("start-up will refuse this directory: its topic list cannot be read by this "
                  "version (restore __topics.json, or use the logserver that wrote it)")
        elif result.needs_data_loss:
            print("start-up will refuse this directory; `logserver repair` cuts the damage off "
                  "(losing the data after it)")
        else:
            print("start-up repairs these by itself (torn tails cut, indexes rebuilt)")
        return EXIT_PROBLEMS
    result = check_data_dir(data_dir, args.node_id)
    _print_result(result)
    if any(p.kind == "node id" for p in result.problems):
        print("logserver repair: not repairing another node's data directory",
              file=sys.stderr)
        return EXIT_USAGE
    if not result.problems:
        print("clean: nothing to repair")
        return EXIT_CLEAN
    try:
        actions = repair_data_dir(data_dir)
    except OSError as exc:
        print(f"logserver repair: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # LogDirLockedError and anything recovery cannot handle
        print(f"logserver repair: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"repair did {len(actions)} things:")
    for action in actions:
        print(f"  {action}")
    after = check_data_dir(data_dir)
    if after.problems:
        print("problems left after repair:")
        for problem in after.problems:
            print(f"  {problem}")
    else:
        print("clean after repair")
    return EXIT_PROBLEMS
