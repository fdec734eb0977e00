"""The suite's one way to wait: poll a condition until it holds, never sleep and hope."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, what: str = "condition", *,
               interval: float = 0.05, ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail naming
    ``what`` after ``timeout`` seconds. Exceptions of the ``ignore`` types count as not
    yet (a listener not up, say)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except ignore:
            value = None  # type: ignore[assignment]
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
