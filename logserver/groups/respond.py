"""Turn a coordinator future into what a handler returns: a response now, or an awaitable.

Handlers may return a response object or an awaitable resolving to one; answering at
once when the future is already resolved (the common case) costs no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def respond(future: asyncio.Future[T], build: Callable[[T], R]) -> R | Awaitable[R]:
    if future.done():
        return build(future.result())
    return _later(future, build)


async def _later(future: asyncio.Future[T], build: Callable[[T], R]) -> R:
    return build(await future)
