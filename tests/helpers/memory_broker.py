"""Handlers in-process: a Broker on the in-memory storage engine (no sockets, no files)
and a handler call with a request header, awaited when the handler is async."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from kafkaproto import RequestHeader
from logserver.broker import Broker
from logserver.config import load_config
from logserver.storage.memory import MemoryStorage


def with_broker(scenario: Callable[[Broker], Awaitable[None]], **settings: object) -> None:
    async def main() -> None:
        flags = {"log.dirs": "/nonexistent-memory-only", "num.partitions": "2",
                 **{k: str(v) for k, v in settings.items()}}
        config = load_config(flags, environ={})
        broker = Broker(config, storage=MemoryStorage(config))
        broker.open()
        await broker.start()
        try:
            await scenario(broker)
        finally:
            await broker.close()

    asyncio.run(main())


async def call(handler: Callable[..., Any], broker: Broker, api_key: int, version: int,
               request: object) -> Any:
    result = handler(broker, RequestHeader(api_key, version, 1, "unit"), request)
    return await result if inspect.isawaitable(result) else result
