"""Timer requests of the sans-I/O group logic turned into ``loop.call_later`` handles.

One handle per ``TimerKey``: arming a key that is armed replaces its handle, so only the
latest request of a key can fire. A fired key is handed to ``on_fire``; the logic that
armed it decides whether it still matters. After ``close`` nothing is armed any more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from logserver.groups.decisions import TimerKey

log = logging.getLogger(__name__)


class Timers:
    def __init__(self, loop: Callable[[], asyncio.AbstractEventLoop],
                 on_fire: Callable[[TimerKey], None]) -> None:
        self._loop = loop
        self._on_fire = on_fire
        self._handles: dict[TimerKey, asyncio.TimerHandle] = {}
        self._closed = False

    def arm(self, key: TimerKey, delay_ms: int) -> None:
        if self._closed:
            return
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        self._handles[key] = self._loop().call_later(delay_ms / 1000, self._fire, key)

    def cancel(self, key: TimerKey) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_armed(self, key: TimerKey) -> bool:
        return key in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        """Cancel every handle; later requests to arm are ignored."""
        self._closed = True
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, key: TimerKey) -> None:
        self._handles.pop(key, None)
        try:
            self._on_fire(key)
        except Exception:  # one faulty timer must not take the others down with it
            log.exception("timer %s failed", key)
