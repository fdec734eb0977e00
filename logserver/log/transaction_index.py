"""The aborted-transactions index of one segment: Kafka's ``.txnindex`` file.

One entry per abort marker appended to the segment: the producer id, the first offset
of the aborted transaction, the marker's offset (its last offset) and the last stable
offset just after the abort. A read_committed fetch asks the segments from the one
holding its fetch offset for the aborted transactions that overlap its range; the LSO
field lets the search stop early, as in Kafka: once an entry's LSO is at or past the end
of the range, no later abort can have begun inside it.

The file is Kafka's layout (34 bytes an entry, version 0) and lives beside the segment,
under the segment's suffix (``.cleaned`` copies, ``.deleted`` after removal). Every
segment has one, empty when no transaction aborted there, so a missing file means
"not built" (a data directory from before this index existed, or lost) and start-up
rebuilds it. Entries are written with ``pwrite`` after their marker, fsynced with the
segment once it is inactive; after an unclean stop the segments from the recovery point
on get theirs rebuilt (see ``Log``). The entries are read once, when first asked, and
kept until the segment goes idle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from logserver.log.fsutil import fsync_path

logger = logging.getLogger(__name__)

__all__ = ["TXN_INDEX_SUFFIX", "AbortedTxnEntry", "TransactionIndex", "parse_entries"]

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, LSO
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxnEntry(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset
    last_stable_offset: int  # the partition's LSO right after the abort


def parse_entries(raw: bytes) -> list[AbortedTxnEntry]:
    """The entries of a ``.txnindex`` file's bytes; ValueError if they are not well formed."""
    if len(raw) % ENTRY_SIZE:
        raise ValueError(f"length {len(raw)} is not a multiple of {ENTRY_SIZE}")
    entries: list[AbortedTxnEntry] = []
    for i in range(0, len(raw), ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(raw, i)
        if version != VERSION:
            raise ValueError(f"entry {i // ENTRY_SIZE} has version {version}")
        entries.append(AbortedTxnEntry(*fields))
    return entries


class TransactionIndex:
    """The ``.txnindex`` of one segment (thread-safe: appends on the loop, renames on a
    worker thread)."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: list[AbortedTxnEntry] | None = None  # cached once read
        if create:
            self.reset()

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _load(self) -> list[AbortedTxnEntry]:
        entries = self._entries
        if entries is None:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                raw = b""
            try:
                entries = parse_entries(raw)
            except ValueError as exc:  # checked at load; damaged since: read what parses
                logger.error("%s: %s", self.path, exc)
                entries = parse_entries(raw[: len(raw) // ENTRY_SIZE * ENTRY_SIZE])
            self._entries = entries
        return entries

    def entries(self) -> list[AbortedTxnEntry]:
        with self._lock:
            return list(self._load())

    def sanity_problem(self, base_offset: int, next_offset: int) -> str | None:
        """Why the file cannot be trusted for a segment holding [base, next), or None."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return f"{self.path.name} is missing"
        try:
            entries = parse_entries(raw)
        except ValueError as exc:
            return f"{self.path.name}: {exc}"
        last = base_offset - 1
        for i, entry in enumerate(entries):
            if not (last < entry.last_offset < next_offset) or entry.first_offset > entry.last_offset:
                return f"{self.path.name}: entry {i} {tuple(entry)} is outside the segment or out of order"
            last = entry.last_offset
        with self._lock:
            self._entries = entries
        return None

    def append(self, entry: AbortedTxnEntry) -> None:
        data = _ENTRY.pack(VERSION, *entry)
        with self._lock:
            entries = self._load()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, len(entries) * ENTRY_SIZE)
            finally:
                os.close(fd)
            entries.append(entry)

    def collect(self, start: int, end: int) -> tuple[list[AbortedTxnEntry], bool]:
        """Aborted transactions overlapping [start, end), and whether the search is
        complete (an entry's LSO reached ``end``: later segments cannot add any)."""
        found: list[AbortedTxnEntry] = []
        with self._lock:
            entries = self._load()
        for entry in entries:
            if entry.last_offset >= start and entry.first_offset < end:
                found.append(entry)
            if entry.last_stable_offset >= end:
                return found, True
        return found, False

    def reset(self) -> None:
        """Empty the file (creating it): before a rebuild, or for a new segment."""
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.close(fd)
            self._entries = []

    def truncate_to(self, offset: int) -> int:
        """Drop the entries of markers at or after ``offset``; returns how many went."""
        with self._lock:
            entries = self._load()
            keep = sum(1 for entry in entries if entry.last_offset < offset)
            dropped = len(entries) - keep
            if dropped:
                os.truncate(self.path, keep * ENTRY_SIZE)
                del entries[keep:]
            return dropped

    def copy_to(self, target: Path) -> TransactionIndex:
        """A copy of this file at ``target`` (the cleaner's ``.cleaned`` segment)."""
        with self._lock:
            data = b"".join(_ENTRY.pack(VERSION, *e) for e in self._load())
        with open(target, "wb") as out:
            out.write(data)
        return TransactionIndex(target)

    def rename(self, target: Path) -> None:
        """Move the file (FileNotFoundError if it is missing; the path moves anyway)."""
        with self._lock:
            try:
                os.rename(self.path, target)
            finally:
                self.path = target

    def fsync(self) -> None:
        fsync_path(self.path, missing_ok=True)

    def release(self) -> None:
        """Forget the cached entries (the segment went idle)."""
        with self._lock:
            self._entries = None

    def delete(self) -> None:
        with self._lock, contextlib.suppress(FileNotFoundError):
            self.path.unlink()
