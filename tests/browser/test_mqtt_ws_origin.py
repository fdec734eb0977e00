"""Hostile input on the MQTT WebSocket listener. Which web pages may open MQTT over
WebSockets: a real Chromium (Playwright) loads the
test's client page from a foreign site (a name the browser resolves to 127.0.0.1, as a
site of an attacker's would be reached) and is refused, also through DNS rebinding; pages
of this host and listed origins connect. aiohttp's client for the header cases and an
oversized message (close 1009)."""

from __future__ import annotations

import asyncio
import functools
import http.server
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from helpers.mqtt_procs import BridgeProcess
from helpers.waiting import wait_until
from playwright.sync_api import sync_playwright

from commonlib.childproc import HOST, can_connect, free_port

pytestmark = pytest.mark.timeout(120)
FOREIGN = "attacker.test"  # resolved to 127.0.0.1 by the browser only (--host-resolver-rules)


@pytest.fixture
def page_port() -> Iterator[int]:
    """tests/browser/mqtt_ws_page.html (a minimal MQTT client page) served on 127.0.0.1."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(Path(__file__).parent))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _bridge(request, server, tmp_path, *args: str) -> BridgeProcess:
    ws_port = free_port()
    b = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                      "--ws-listen", f"{HOST}:{ws_port}", *args)
    request.addfinalizer(b.stop)
    b.start()
    b.ws_port = ws_port  # type: ignore[attr-defined]
    wait_until(lambda: can_connect(ws_port), 30, "the WebSocket listener")
    return b


def _browser_connects(page_url: str, ws_url: str) -> dict:
    """The page's MQTT client state once it got a CONNACK or its WebSocket closed."""
    cid = "page-" + uuid.uuid4().hex[:6]
    query = urllib.parse.urlencode({"url": ws_url, "cid": cid, "stream": "telemetry", "n": 0})
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=[f"--host-resolver-rules=MAP {FOREIGN} 127.0.0.1"])
        try:
            page = browser.new_page()
            page.goto(f"{page_url}?{query}")
            page.wait_for_function("window.mqtt.connack !== null || window.mqtt.closed !== null",
                                   timeout=30_000)
            return page.evaluate("window.mqtt")
        finally:
            browser.close()


def _status(ws_port: int, origin: str | None, host: str | None = None) -> int:
    async def attempt() -> int:
        headers = {k: v for k, v in (("Origin", origin), ("Host", host)) if v is not None}
        async with aiohttp.ClientSession() as http_session:
            try:
                async with http_session.ws_connect(f"http://{HOST}:{ws_port}/mqtt",
                                                   protocols=("mqtt",), headers=headers):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    return asyncio.run(attempt())


def test_a_foreign_page_cannot_connect(request, server, tmp_path, page_port):
    bridge = _bridge(request, server, tmp_path)
    state = _browser_connects(f"http://{FOREIGN}:{page_port}/mqtt_ws_page.html",
                              f"ws://{HOST}:{bridge.ws_port}/mqtt")
    assert state["connack"] is None and state["closed"] is not None, state
    assert f"page origin 'http://{FOREIGN}:{page_port}' not allowed" in bridge.output()


def test_dns_rebinding_is_not_the_same_host(request, server, tmp_path, page_port):
    """The attacker's page talks to its own name, now pointing at us: same host in the
    browser's eyes, but not one of this server's names."""
    bridge = _bridge(request, server, tmp_path)
    state = _browser_connects(f"http://{FOREIGN}:{page_port}/mqtt_ws_page.html",
                              f"ws://{FOREIGN}:{bridge.ws_port}/mqtt")
    assert state["connack"] is None and state["closed"] is not None, state


def test_pages_of_this_host_and_listed_origins_connect(request, server, tmp_path, page_port):
    bridge = _bridge(request, server, tmp_path, "--ws-allowed-origin",
                     f"http://{FOREIGN}:{page_port}/")
    own = _browser_connects(f"http://{HOST}:{page_port}/mqtt_ws_page.html",
                            f"ws://{HOST}:{bridge.ws_port}/mqtt")
    assert own["connack"] == 0, own
    listed = _browser_connects(f"http://{FOREIGN}:{page_port}/mqtt_ws_page.html",
                               f"ws://{HOST}:{bridge.ws_port}/mqtt")
    assert listed["connack"] == 0, listed


def test_origin_headers(request, server, tmp_path):
    bridge = _bridge(request, server, tmp_path)
    port = bridge.ws_port
    assert _status(port, None) == 101  # not a browser: devices, gateways, scripts
    assert _status(port, "http://127.0.0.1:9") == 101  # a page of this host, another port
    assert _status(port, "http://localhost:9", host=f"localhost:{port}") == 101
    assert _status(port, "null") == 403  # a file or a sandboxed page
    assert _status(port, "https://app.example.com") == 403
    assert _status(port, "http://evil.example", host=f"evil.example:{port}") == 403


def test_an_oversized_websocket_message_closes_only_that_connection(request, server, tmp_path):
    """A WebSocket message above the packet limit (plus framing slack) is refused unread
    with close code 1009, as a too-large MQTT packet is; other connections carry on."""
    bridge = _bridge(request, server, tmp_path, "--max-packet-size", "65536")

    async def attempt() -> tuple[int | None, int]:
        async with aiohttp.ClientSession() as http_session:
            url = f"http://{HOST}:{bridge.ws_port}/mqtt"
            async with http_session.ws_connect(url, protocols=("mqtt",)) as big, \
                    http_session.ws_connect(url, protocols=("mqtt",)) as other:
                await big.send_bytes(b"\x30" + b"\xff" * 300_000)
                msg = await big.receive(timeout=30)
                assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
                await other.send_bytes(bytes([0x10, 13, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 30, 0, 1])
                                       + b"w")
                connack = await other.receive(timeout=30)
                return big.close_code, connack.data[3] if connack.type == aiohttp.WSMsgType.BINARY else -1

    close_code, connack_code = asyncio.run(attempt())
    assert close_code == 1009
    assert connack_code == 0
