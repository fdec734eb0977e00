"""Read a partition's segment files straight from disk, independently of the server.

Used after every crash cycle: every batch must parse, carry a valid CRC-32C, and the
offsets must be dense from the log start offset (each batch starting where the previous
one ended, across segment files too). Batches already verified in an earlier cycle are
recognised by (base offset, CRC): if both match, the records are unchanged, so only new
batches are decoded (this keeps 1000+ cycles linear, not quadratic).
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kafkaproto.batch import BATCH_HEADER_SIZE, CorruptBatchError, parse_header, verify_crc
from kafkaproto.records import decode_batch


class LogCheckError(AssertionError):
    """The files on disk break an invariant (CRC, density, torn data)."""


@dataclass
class PartitionFiles:
    """What is known about one partition's files from earlier scans."""

    directory: Path
    batch_crcs: dict[int, int] = field(default_factory=dict)  # base offset -> crc
    values: dict[int, bytes | None] = field(default_factory=dict)  # offset -> value
    start_offset: int = 0
    end_offset: int = 0
    # path -> (size, crc32c of the whole file, base offsets of its batches, next offset):
    # a file unchanged since it was fully verified is not parsed again (long runs).
    verified_files: dict[str, tuple[int, int, list[int], int]] = field(default_factory=dict)


def scan_partition(state: PartitionFiles) -> tuple[list[int], dict[int, bytes | None]]:
    """Re-read every segment of one partition.

    Returns the offsets decoded anew and the records that disappeared (offset -> value:
    cut by a simulated power loss and recovery).

    Raises LogCheckError on a bad CRC, a gap or overlap in offsets, a trailing partial
    batch, or a batch whose content changed since an earlier scan.
    """
    segments = sorted(state.directory.glob("*.log"))
    expected: int | None = None
    decoded: list[int] = []
    seen: set[int] = set()
    for path in segments:
        data = path.read_bytes()
        base = int(path.name[: -len(".log")])
        if expected is not None and data and base != expected:
            raise LogCheckError(f"{path.name}: starts at {base}, previous segment ended at {expected}")
        whole_crc = crc32c(data)
        cached = state.verified_files.get(str(path))
        if cached is not None and cached[0] == len(data) and cached[1] == whole_crc:
            if expected is None and cached[2]:
                expected = state.start_offset = cached[2][0]
            if cached[2] and cached[2][0] != expected:
                raise LogCheckError(f"{path.name}: first batch at {cached[2][0]}, expected {expected}")
            seen.update(cached[2])
            if cached[2]:
                expected = cached[3]
            continue
        bases: list[int] = []
        pos = 0
        while pos < len(data):
            if len(data) - pos < BATCH_HEADER_SIZE:
                raise LogCheckError(f"{path.name}: {len(data) - pos} trailing bytes at {pos}")
            header = parse_header(data, pos)
            if pos + header.size > len(data):
                raise LogCheckError(f"{path.name}: torn batch at {pos}")
            if expected is None:
                expected = header.base_offset
                state.start_offset = expected
            if header.base_offset != expected:
                raise LogCheckError(
                    f"{path.name}: batch at {pos} has base offset {header.base_offset}, "
                    f"expected {expected} (offsets not dense)")
            if not verify_crc(data, pos, header):
                raise LogCheckError(f"{path.name}: CRC mismatch in batch at {pos} (offset {expected})")
            known = state.batch_crcs.get(header.base_offset)
            if known is None:
                _, records = decode_batch(data, pos, verify_crc=False)
                offsets = [r.offset for r in records]
                if offsets != list(range(header.base_offset, header.next_offset)):
                    raise LogCheckError(f"{path.name}: record offsets {offsets[:5]}... not dense")
                for r in records:
                    state.values[r.offset] = r.value
                state.batch_crcs[header.base_offset] = header.crc
                decoded.extend(offsets)
            elif known != header.crc:
                raise LogCheckError(f"{path.name}: batch at offset {expected} changed since last scan")
            seen.add(header.base_offset)
            bases.append(header.base_offset)
            expected = header.next_offset
            pos += header.size
        state.verified_files[str(path)] = (len(data), whole_crc, bases, expected or base)
    end = expected if expected is not None else state.start_offset
    # Batches that disappeared (truncated by recovery) are forgotten, with their records.
    for gone in [b for b in state.batch_crcs if b not in seen]:
        del state.batch_crcs[gone]
    live = {str(p) for p in segments}
    for stale in [p for p in state.verified_files if p not in live]:
        del state.verified_files[stale]
    removed: dict[int, bytes | None] = {}
    if end < state.end_offset:
        for offset in range(end, state.end_offset):
            if offset in state.values:
                removed[offset] = state.values.pop(offset)
    state.end_offset = end
    return decoded, removed


@dataclass(frozen=True)
class BatchExtent:
    """Where one batch lies: its segment file and the byte just after it."""

    path: str
    base_offset: int
    next_offset: int
    end: int


def batch_extents(directory: Path) -> list[BatchExtent]:
    """The batches of one partition's segments as they are on disk now, in offset order;
    a torn tail (as a kill -9 mid-write leaves) ends its file's list. Read before a
    simulated power loss, to tell which acknowledged records an fsync covered."""
    extents: list[BatchExtent] = []
    for path in sorted(Path(os.path.realpath(directory)).glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while len(data) - pos >= BATCH_HEADER_SIZE:
            try:
                header = parse_header(data, pos)
            except CorruptBatchError:
                break
            if pos + header.size > len(data):
                break
            pos += header.size
            extents.append(BatchExtent(str(path), header.base_offset, header.next_offset, pos))
    extents.sort(key=lambda e: e.base_offset)
    return extents


def extent_of(extents: list[BatchExtent], offset: int) -> BatchExtent | None:
    """The batch (of :func:`batch_extents`) that holds ``offset``, if any."""
    i = bisect.bisect_right([e.base_offset for e in extents], offset) - 1
    if i >= 0 and extents[i].base_offset <= offset < extents[i].next_offset:
        return extents[i]
    return None
