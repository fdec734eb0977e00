"""A one-line progress display on stderr.

A benchmark that prints nothing for a minute looks hung; one that prints a line per
batch drowns its own result. So: one line, rewritten in place on a terminal, and a
line every few seconds when stderr is a file or a pipe (CI logs).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO


class Progress:
    """Shows ``label done/total elapsed`` for the step in progress."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._tty = enabled and self._stream.isatty()
        self._interval = 0.2 if self._tty else 5.0
        self._label = ""
        self._total = 0
        self._unit = ""
        self._start = 0.0
        self._last = 0.0
        self._line_open = False
        self._steps = 0
        self._done_steps = 0

    def steps(self, total: int) -> None:
        """Announces how many steps the run has, for the ``[k/N]`` prefix."""
        self._steps, self._done_steps = total, 0

    def advance(self, count: int = 1) -> None:
        """Marks steps done (a workload, a baseline, a server)."""
        self._done_steps = min(self._steps, self._done_steps + count)

    def skip(self, count: int) -> None:
        """Steps that will not run (a peer that could not start)."""
        self.advance(count)

    def _prefix(self) -> str:
        if not self._steps:
            return ""
        return f"[{min(self._done_steps + 1, self._steps)}/{self._steps}] "

    def start(self, label: str, total: int, unit: str = "records") -> None:
        """Begins a step; ``total`` is what ``update`` counts towards (0: unknown)."""
        self._label, self._total, self._unit = label, total, unit
        self._start = self._last = time.perf_counter()
        self._show(0, force=True)

    def update(self, done: int) -> None:
        """Reports progress; cheap enough to call every few thousand records."""
        now = time.perf_counter()
        if now - self._last >= self._interval:
            self._last = now
            self._show(done)

    def finish(self, summary: str) -> None:
        """Ends the step with a summary line that stays on screen."""
        if not self._enabled:
            return
        elapsed = time.perf_counter() - self._start
        self._write(f"{self._prefix()}{self._label}: {summary} ({elapsed:.1f}s)\n")
        self._line_open = False

    def clear(self) -> None:
        """Erases an unfinished progress line so a log message starts on a clean line."""
        if self._line_open:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._line_open = False

    def _show(self, done: int, force: bool = False) -> None:
        if not self._enabled or (not self._tty and force):
            return  # in a log, the finish line alone says what ran
        elapsed = time.perf_counter() - self._start
        if self._total:
            count = f"{done:,}/{self._total:,} {self._unit} {100.0 * done / self._total:5.1f}%"
        else:
            count = f"{done:,} {self._unit}"
        text = f"{self._prefix()}{self._label}: {count}  {elapsed:5.1f}s"
        if self._tty:
            self._write(f"\r\x1b[K{text}")
            self._line_open = True
        else:
            self._write(text + "\n")

    def _write(self, text: str) -> None:
        if self._line_open and text.endswith("\n") and not text.startswith("\r"):
            text = "\r\x1b[K" + text
        self._stream.write(text)
        self._stream.flush()


class ProgressAwareHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stderr log handler that first erases the progress line, so lines never mix."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(sys.stderr)
        self._progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.clear()
        super().emit(record)


NULL_PROGRESS = Progress(enabled=False)
