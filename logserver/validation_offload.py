"""Threads that validate large compressed produce batches, off the event loop.

Validating a compressed batch means decompressing it (capped) and walking every record:
1-7 ms per MB on the loop, during which no other connection is served. The codecs
(zstandard, lz4, cramjam) release the interpreter lock while they inflate, so on a
second core that work overlaps with the loop. ``Partition`` hands a batch compressed
with one of ``codecs`` (zstd: the one that measured faster there) of at least
``min_bytes`` to ``run``; its append waits for the verdict and for every
earlier append of the same partition, so the order of appends is the order requests
arrived. The setting is ``produce.validation.thread.min.bytes`` (-1: off). One thread:
on two cores a second validation thread measured slower (more interpreter-lock
hand-offs against the loop), see benchmarks/validate_offload.py.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from kafkaproto.batch import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, COMPRESSION_MASK, Compression

__all__ = ["ValidationOffload"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


#: Codecs whose batches go to the thread. Measured (benchmarks/validate_offload.py): for
#: zstd other connections' latency is 4-20x lower; its throughput was 1.5x the loop's
#: before decompression reused its buffers, even (0.65x) since; lz4 and gzip were even or
#: slower on the thread, so they stay on the loop.
OFFLOADED_CODECS = frozenset({int(Compression.ZSTD)})


class ValidationOffload:
    """A small pool for batch validation, and which batches go there."""

    def __init__(self, min_bytes: int, threads: int = 1,
                 codecs: frozenset[int] = OFFLOADED_CODECS) -> None:
        if min_bytes < 0:
            raise ValueError("min_bytes must be >= 0")
        self.min_bytes = min_bytes
        self.codecs = codecs
        self._executor = ThreadPoolExecutor(max_workers=threads,
                                            thread_name_prefix="produce-validate")

    async def run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on a pool thread; the loop only awaits it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def takes(self, records: memoryview) -> bool:
        """Whether this batch is validated here (its size and codec)."""
        return (len(records) >= max(self.min_bytes, BATCH_HEADER_SIZE)
                and records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK in self.codecs)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
