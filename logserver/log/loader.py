"""Opening a partition directory: its segments, validated and repaired (Kafka's LogLoader).

Segments from the one holding the recovery point on were not known to be durable when
the process stopped without a clean shutdown, so they are re-validated batch by batch
(CRC included) and truncated at the first damage; earlier segments are trusted and only
get a cheap index sanity check. Leftover temporary files (``.cleaned``, ``.deleted``,
``.tmp``, ``.swap``) and indexes without a log are removed.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from logserver.log.config import LogConfig
from logserver.log.index import OffsetIndex, TimeIndex
from logserver.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, Segment
from logserver.log.transaction_index import TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)

__all__ = ["LoadedSegments", "load_segments"]

_TEMP_SUFFIXES = (".tmp", CLEANED_SUFFIX, ".swap", DELETED_SUFFIX)
_INDEX_SUFFIXES = (OffsetIndex.suffix, TimeIndex.suffix, TXN_INDEX_SUFFIX)


@dataclass
class LoadedSegments:
    """What loading found: the segments in order, the ones a flush must sync, a report."""

    segments: list[Segment] = field(default_factory=list)
    unflushed: list[Segment] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # what recovery did, one line each
    no_directory: bool = False  # a partition never written (made lazily): nothing to load

    def close(self) -> None:
        for seg in self.segments:
            seg.close()


def load_segments(
    directory: Path,
    config: LogConfig,
    recovery_point: int,
    *,
    clean_shutdown: bool,
    allow_data_loss: bool,
    directory_exists: bool | None = None,
) -> LoadedSegments:
    """Open every segment of ``directory`` (creating an empty first one if none).

    ``directory_exists``: what the caller already knows (from one listing of the data
    directory for all partitions), so no stat per partition; None: look.

    ``allow_data_loss=False`` makes recovery raise CorruptLogError instead of
    truncating damage that is not a torn tail (see Segment.recover).
    """
    result = LoadedSegments()
    if directory_exists is None:
        directory_exists = os.path.isdir(directory)
    if not directory_exists:
        # A lazily created partition never written: one lazy segment, no file looked at.
        result.no_directory = True
        result.segments.append(Segment(directory, 0, config, active=True, lazy=True))
        return result
    try:
        _load(directory, config, recovery_point, clean_shutdown, allow_data_loss, result)
    except BaseException:
        result.close()
        raise
    return result


def _segment_bases(directory: Path) -> list[int]:
    """The base offsets of the ``.log`` files; removes temporary files and orphan indexes.

    One directory listing (start-up opens tens of thousands of partitions).
    """
    bases: list[int] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:  # a partition never written: its directory comes with data
        return bases
    for name in names:
        if name.endswith(_TEMP_SUFFIXES):
            logger.warning("%s: removing leftover temporary file %s", directory, name)
            (directory / name).unlink()
        elif name.endswith(LOG_SUFFIX):
            try:
                bases.append(int(name[: -len(LOG_SUFFIX)]))
            except ValueError:
                logger.warning("%s: ignoring unexpected file %s", directory, name)
    bases.sort()
    base_set = set(bases)
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            if name.endswith(suffix):
                with contextlib.suppress(ValueError):
                    if int(name[: -len(suffix)]) not in base_set:
                        logger.warning("%s: removing index without a log: %s", directory, name)
                        (directory / name).unlink()
    return bases


def _delete_segment_files(directory: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, OffsetIndex.suffix, TimeIndex.suffix, TXN_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            (directory / f"{base:020d}{suffix}").unlink()


def _load(
    directory: Path,
    config: LogConfig,
    recovery_point: int,
    clean_shutdown: bool,
    allow_data_loss: bool,
    result: LoadedSegments,
) -> None:
    bases = _segment_bases(directory)
    segments, actions = result.segments, result.actions
    unflushed: dict[Segment, None] = {}
    first_unflushed = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    expected: int | None = None
    for i, base in enumerate(bases):
        data_follows = any(
            (directory / f"{later:020d}{LOG_SUFFIX}").stat().st_size for later in bases[i + 1 :]
        )
        seg = Segment(directory, base, config, active=False)
        try:
            if not clean_shutdown and i >= first_unflushed:
                truncated = seg.recover(
                    0, expected, allow_data_loss=allow_data_loss, data_follows=data_follows
                )
                # What was read back may sit only in the page cache (the process died,
                # not the machine): the first flush must fsync it before the recovery
                # point moves past it.
                unflushed[seg] = None
                # Its aborted transactions are rebuilt by the Log's producer state replay.
                seg.check_txn_index(trusted=False)
            else:
                before = seg.size
                if seg.load(allow_data_loss=allow_data_loss, data_follows=data_follows):
                    unflushed[seg] = None  # rebuilt index files
                    actions.append(f"{seg.path}: rebuilt indexes ({seg.index_problem})")
                truncated = before - seg.size
                if seg.check_txn_index(trusted=True):
                    unflushed[seg] = None
                    actions.append(f"{seg.txn_index.path}: rebuilt transaction index")
        except BaseException:
            seg.close()
            raise
        if seg.last_truncation:
            actions.append(seg.last_truncation)
            if expected is not None and seg.size and seg.base_offset != expected:
                logger.warning(
                    "%s: segment %d does not continue from offset %d", directory, base, expected
                )
        if not seg.size and (
            (segments and seg.base_offset != expected)  # does not continue the log
            or (not truncated and i < len(bases) - 1)  # an empty one in the middle
        ):
            logger.warning("%s: deleting empty segment %s", directory, seg.path.name)
            actions.append(f"{seg.path}: deleted (empty)")
            unflushed.pop(seg, None)
            seg.delete()
        else:
            segments.append(seg)
            expected = seg.next_offset
            # Loaded: its files close until read, so start-up holds 3 descriptors per
            # partition (the active segment's), not 3 per segment.
            seg.close_files_if_idle(force=True)
        if truncated:
            for later in bases[i + 1 :]:
                later_path = directory / f"{later:020d}{LOG_SUFFIX}"
                with contextlib.suppress(OSError):
                    actions.append(
                        f"{later_path}: deleted ({later_path.stat().st_size} bytes after "
                        f"the truncation at offset {expected})"
                    )
                _delete_segment_files(directory, later)
            if bases[i + 1 :]:
                logger.warning(
                    "%s: deleted %d segments after the truncation at offset %d: %s",
                    directory,
                    len(bases) - i - 1,
                    expected,
                    bases[i + 1 :],
                )
            break
    if not segments:
        start = expected if expected is not None else 0
        # An empty partition: its files are created by the first append (lazy).
        segments.append(Segment(directory, start, config, active=True, lazy=not bases))
    segments[-1].make_active()
    result.unflushed = list(unflushed)
