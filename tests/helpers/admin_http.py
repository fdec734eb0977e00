"""The server's admin HTTP API from the tests: JSON GETs (anonymous or with a user's basic
auth), Prometheus samples of /metrics, and a text/event-stream read event by event."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from helpers.serverproc import ServerProcess


def get(url: str) -> tuple[int, dict]:
    """(status, JSON body); ConnectionError while nothing listens yet."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the server's /metrics, by (name, sorted labels)."""
    with urllib.request.urlopen(server.admin_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    """One sample of ``scrape``'s answer; 0 when absent."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def events(url: str) -> Iterator[tuple[str, Any]]:
    """(event name, parsed data) of a text/event-stream, one per blank-line-ended event."""
    with urllib.request.urlopen(url, timeout=20) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        name, data = "message", []
        for raw in response:
            line = raw.decode().rstrip("\n")
            if not line:
                if data:
                    yield name, json.loads("\n".join(data))
                name, data = "message", []
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())


def get_as(url: str, user: str) -> tuple[int, object]:
    """(status, JSON body) of a GET with ``user``'s basic auth (password ``<user>-pw``, as
    the users of the ``acl_server`` fixture)."""
    async def fetch() -> tuple[int, object]:
        async with aiohttp.ClientSession() as session, session.get(
                url, auth=aiohttp.BasicAuth(user, f"{user}-pw")) as r:
            return r.status, await r.json()

    return asyncio.run(fetch())
