"""The cyclic garbage collector paused while many long-lived objects are built at once.

Creating or loading tens of thousands of partitions allocates a dozen objects each
(Log, segments, indexes, locks, paths); every 700 allocations the collector runs, and
its older generations, which it scans whole, grow with every partition made so far: at
50,000 partitions two thirds of a creation's CPU was the collector finding nothing
(none of these objects is garbage). The pause is process-wide (``gc`` has no other
kind), counted so overlapping pauses from two threads nest, and lifted at once when the
last one ends; nothing is lost meanwhile, cycles made then are collected later.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block (nests across threads)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
