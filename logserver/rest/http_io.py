"""Request/response helpers the REST Proxy's routes share (logserver.rest.app for the
v2 topic routes, logserver.rest.consumers for the consumer-instance ones): JSON in and
out, query parameters, the record view, and the long-polling read."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from logserver.rest import remote_reads
from logserver.rest.errors import BAD_REQUEST, RestError
from logserver.rest.formats import V2, decode, headers_view
from logserver.rest.reading import read_records

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

MAX_WAIT_MS = 30_000  # longest long poll a request may ask for


def reply(body: Any, status: int = 200, content_type: str = V2) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=content_type)


async def read_json(request: web.Request) -> Any:
    """The body as JSON (400 when it is not); None for an empty body."""
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RestError(400, BAD_REQUEST, f"malformed JSON: {exc}") from None


def int_param(request: web.Request, name: str, default: int | None = None) -> int:
    text = request.query.get(name)
    if text is None:
        if default is None:
            raise RestError(400, BAD_REQUEST, f"query parameter {name} is required")
        return default
    try:
        return int(text)
    except ValueError:
        raise RestError(400, BAD_REQUEST, f"query parameter {name} must be an integer") from None


def record_view(topic: str, partition: int, record: Any, fmt: str) -> dict[str, Any]:
    """A record as v2 shows it; ``headers`` (Confluent v3's form) only when it has some."""
    view = {"topic": topic, "key": decode(fmt, record.key), "value": decode(fmt, record.value),
            "partition": partition, "offset": record.offset}
    if record.headers:
        view["headers"] = headers_view(record.headers)
    return view


async def read_waiting(broker: WithCluster, partitions: list[tuple[str, int]],
                       positions: dict[tuple[str, int], int], max_bytes: int,
                       timeout_ms: int, committed: bool = False,
                       errors: dict[tuple[str, int], int] | None = None,
                       ) -> dict[tuple[str, int], list[Any]]:
    """Records of ``partitions`` from ``positions``; waits up to ``timeout_ms`` for some.
    Partitions another broker leads are fetched from it (logserver.rest.remote_reads),
    their errors put in ``errors``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    remote = remote_reads.by_leader(broker, partitions)
    elsewhere = {tp for tps in remote.values() for tp in tps}
    local = [tp for tp in partitions if tp not in elsewhere]
    while True:
        found: dict[tuple[str, int], list[Any]] = {}
        budget = max_bytes
        for tp in local:
            if budget <= 0:
                break
            got = read_records(broker, tp[0], tp[1], positions[tp], budget, committed)
            if got:
                found[tp] = got
                budget -= sum(len(r.value or b"") + len(r.key or b"") for r in got)
        left = deadline - loop.time()
        if remote and budget > 0:
            wait_ms = 0 if found else int(max(left, 0) * 1000)
            fetching = asyncio.ensure_future(remote_reads.fetch_all(
                broker, remote, positions, budget, wait_ms, committed, errors))
            waits: set[asyncio.Future[Any]] = {fetching}
            if local and wait_ms:
                waits.add(asyncio.ensure_future(broker.storage.wait_for_append(local, left)))
            done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            if fetching in done:
                found.update(fetching.result())
                return found
            continue  # appended here: read it, and ask the leaders again without waiting
        if found or left <= 0 or not partitions:
            return found
        await broker.storage.wait_for_append(local, left)
