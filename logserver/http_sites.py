"""Serve an aiohttp app on a list of ``http://`` / ``https://`` listeners.

Shared by the admin API and the REST Proxy: each runs in the broker's event loop, and a
port already in use is logged, not fatal (the Kafka listeners matter more).
"""

from __future__ import annotations

import logging
import ssl

from aiohttp import web

from logserver.config import Listener

log = logging.getLogger(__name__)

HTTPS = "HTTPS"


async def serve(runner: web.AppRunner, listeners: list[Listener], what: str, setting: str,
                ssl_context: ssl.SSLContext | None = None) -> list[tuple[str, int]]:
    """Start ``runner`` on every listener that can be bound; the addresses bound.

    ``https://`` listeners use ``ssl_context`` (which the caller must then give).
    """
    if not listeners:
        return []
    await runner.setup()
    for listener in listeners:
        context = ssl_context if listener.name == HTTPS else None
        if listener.name == HTTPS and context is None:
            raise ValueError(f"{listener}: an https listener needs a TLS context")
        site = web.TCPSite(runner, listener.host, listener.port, reuse_address=True,
                           ssl_context=context)
        try:
            await site.start()
        except OSError as exc:
            log.error("%s not served on %s:%d: %s (set %s)", what, listener.host,
                      listener.port, exc, setting)
    return [(a[0], a[1]) for a in runner.addresses]
