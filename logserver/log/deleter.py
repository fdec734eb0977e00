"""Physical removal of deleted segment files and partition directories, after a delay.

Deleting a segment (retention, truncation, a compaction swap) or a partition (topic
deletion) first renames it out of the way (``*.deleted`` files, a ``*-delete``
directory); what is renamed is removed here ``file.delete.delay.ms`` later (Kafka's
name and default, 60 s), on a thread of its own so no caller waits for the disk.
Readers that still hold a segment keep reading it through their open descriptor, which
outlives the name anyway. Whatever is still pending at a crash is removed by the next
start-up (the loader drops ``*.deleted`` files, the manager ``*-delete`` directories).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import shutil
import threading
import time
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_FILE_DELETE_DELAY_MS", "FileDeleter", "default_deleter"]

DEFAULT_FILE_DELETE_DELAY_MS = 60_000


def remove_path(path: Path) -> None:
    """Remove a file or a whole directory tree; a missing one is fine."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, exc)


class FileDeleter:
    """A timer thread that removes paths once their delay has passed."""

    def __init__(self, name: str = "log-file-deleter") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._queue: list[tuple[float, int, list[Path]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._current: list[Path] = []  # being removed right now
        self._closed = False

    def schedule(self, paths: Iterable[Path], delay_ms: int) -> None:
        """Remove ``paths`` (files or directories) ``delay_ms`` from now."""
        batch = list(paths)
        if not batch:
            return
        due = time.monotonic() + max(delay_ms, 0) / 1000
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                heapq.heappush(self._queue, (due, next(self._seq), batch))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
                self._cond.notify()
        if closed:  # after close nothing reads the files any more
            for path in batch:
                remove_path(path)

    def pending(self) -> list[Path]:
        """Paths not removed yet (for tests and the shutdown log)."""
        with self._cond:
            queued = [path for _, _, batch in sorted(self._queue) for path in batch]
            return self._current + queued

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if self._queue:
                        wait = self._queue[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._closed:
                    return
                _, _, batch = heapq.heappop(self._queue)
                self._current = batch
            try:
                for path in batch:
                    remove_path(path)
            finally:
                with self._cond:
                    self._current = []

    def close(self, *, remove_pending: bool = True) -> None:
        """Stop the thread; with ``remove_pending`` remove what is still queued now.

        Called when nothing can read the files any more (the manager is closing).
        """
        with self._cond:
            self._closed = True
            queue, self._queue = self._queue, []
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if remove_pending:
            for _, _, batch in sorted(queue):
                for path in batch:
                    remove_path(path)


_default: FileDeleter | None = None
_default_lock = threading.Lock()


def default_deleter() -> FileDeleter:
    """The process-wide deleter for logs opened without a manager (tools, tests)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = FileDeleter("log-file-deleter-default")
        return _default
