"""MQTT over WebSockets with real clients: paho-mqtt's websocket transport (3.1.1 and 5) and
headless Debian chromium (Playwright) running a hand-written client page, publishing telemetry that kafka-python reads from the log and receiving commands written
with kafka-python; aiohttp's WebSocket client for the refusals (wrong subprotocol, text
messages). One logserver and one bridge (``--ws-listen``, ``--wss-listen``) per module,
stopped by pid in the finalizers.
"""

from __future__ import annotations

import asyncio
import functools
import http.server
import queue
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import aiohttp
import paho.mqtt.client as paho
import pytest
from helpers.mqtt_kafka import read_topic
from helpers.mqtt_procs import BridgeProcess
from helpers.tlscerts import CertAuthority
from kafka import KafkaProducer
from playwright.sync_api import sync_playwright

from commonlib.childproc import HOST, can_connect, free_port

pytestmark = pytest.mark.timeout(120)


def wait_port(port: int, bridge: BridgeProcess, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not can_connect(port):
        assert bridge.running, bridge.tail()
        assert time.monotonic() < deadline, f"port {port} not listening\n{bridge.tail()}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict:
    ca = CertAuthority(tmp_path_factory.mktemp("ws-pki"))
    return {"ca": ca.pem.cert, "server": ca.issue(HOST, server=True), "dev-w": ca.issue("dev-w")}


@pytest.fixture(scope="module")
def bridge(request, module_server, tmp_path_factory, pki) -> BridgeProcess:
    work = tmp_path_factory.mktemp("ws-bridge")
    ws_port, wss_port, tls_port = free_port(), free_port(), free_port()
    b = BridgeProcess(module_server.bootstrap, work / "bridge.log", "--log-format", "text",
                      "--uplink-topic", "telemetry*",
                      "--ws-listen", f"{HOST}:{ws_port}", "--wss-listen", f"{HOST}:{wss_port}",
                      "--tls-listen", f"{HOST}:{tls_port}",
                      "--tls-certfile", str(pki["server"].cert),
                      "--tls-keyfile", str(pki["server"].key))
    request.addfinalizer(b.stop)
    b.start()
    wait_port(ws_port, b)
    wait_port(wss_port, b)
    b.ws_port = ws_port  # type: ignore[attr-defined]  # test-side note of the chosen ports
    b.wss_port = wss_port  # type: ignore[attr-defined]
    return b


def ws_client(cid: str, version: int, path: str, tls_ca: str | None = None, cert=None) -> paho.Client:
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, transport="websockets",
                    protocol=paho.MQTTv5 if version == 5 else paho.MQTTv311)
    c.ws_set_options(path=path)
    if tls_ca is not None:
        c.tls_set(ca_certs=tls_ca, certfile=str(cert.cert) if cert else None,
                  keyfile=str(cert.key) if cert else None)
    return c


def round_trip(bridge: BridgeProcess, bootstrap: str, version: int, path: str, port: int,
               tls_ca: str | None = None) -> None:
    """Telemetry in over the WebSocket lands in the log; a command from the log comes back."""
    cid = f"ws{version}-{uuid.uuid4().hex[:6]}"
    stream = "telemetry" + uuid.uuid4().hex[:6]
    got: queue.Queue = queue.Queue()
    subscribed: queue.Queue = queue.Queue()
    c = ws_client(cid, version, path, tls_ca)
    c.on_message = lambda _c, _u, msg: got.put((msg.topic, msg.payload, msg.qos))
    c.on_subscribe = lambda _c, _u, _mid, codes, _p: subscribed.put(codes)
    c.connect(HOST, port, keepalive=30)
    c.loop_start()
    try:
        infos = [c.publish(f"devices/{cid}/{stream}", f"reading {i}".encode(), qos=1)
                 for i in range(20)]
        for info in infos:
            info.wait_for_publish(timeout=20)
            assert info.is_published()
        records = read_topic(bootstrap, stream, 20)
        assert sorted(r.value for r in records) == sorted(f"reading {i}".encode() for i in range(20))
        assert {r.key for r in records} == {cid.encode()}
        assert {dict(r.headers)["mqtt.topic"] for r in records} == {f"devices/{cid}/{stream}".encode()}

        c.subscribe(f"devices/{cid}/commands", qos=1)
        codes = subscribed.get(timeout=20)
        assert [int(getattr(x, "value", x)) for x in codes] == [1]
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for k in range(3):
            producer.send("commands", key=cid.encode(), value=f"cmd {k}".encode())
        producer.flush()
        producer.close()
        received = [got.get(timeout=20) for _ in range(3)]
        assert received == [(f"devices/{cid}/commands", f"cmd {k}".encode(), 1) for k in range(3)]
    finally:
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("version", [5, 4])
@pytest.mark.parametrize("path", ["/mqtt", "/"])
def test_paho_websocket_telemetry_and_commands(bridge, module_server, version, path) -> None:
    round_trip(bridge, module_server.bootstrap, version, path, bridge.ws_port)


def test_paho_secure_websocket(bridge, module_server, pki) -> None:
    round_trip(bridge, module_server.bootstrap, 5, "/mqtt", bridge.wss_port, tls_ca=str(pki["ca"]))


UPGRADE = (b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Protocol: mqtt\r\n\r\n")


def test_wss_client_certificate_is_the_identity(request, module_server, tmp_path, pki) -> None:
    """--wss-listen shares the TLS options: a required client certificate whose CN is the
    device's identity (--use-identity-as-username), as on the MQTT TLS listener."""
    wss_port = free_port()
    b = BridgeProcess(module_server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                      "--uplink-topic", "telemetry*", "--wss-listen", f"{HOST}:{wss_port}",
                      "--tls-listen", f"{HOST}:{free_port()}",
                      "--tls-certfile", str(pki["server"].cert), "--tls-keyfile", str(pki["server"].key),
                      "--tls-cafile", str(pki["ca"]), "--require-certificate",
                      "--use-identity-as-username")
    request.addfinalizer(b.stop)
    b.start()
    wait_port(wss_port, b)
    stream = "telemetry" + uuid.uuid4().hex[:6]
    c = ws_client("dev-w", 5, "/mqtt", str(pki["ca"]), pki["dev-w"])
    c.connect(HOST, wss_port)
    c.loop_start()
    try:
        info = c.publish(f"devices/dev-w/{stream}", b"signed", qos=1)
        info.wait_for_publish(timeout=20)
        assert info.is_published()
    finally:
        c.disconnect()
        c.loop_stop()
    assert [r.value for r in read_topic(module_server.bootstrap, stream, 1)] == [b"signed"]
    assert "client dev-w connected" in b.output()
    # without a client certificate the TLS handshake is refused: no HTTP answer (with a
    # certificate the same request gets "HTTP/1.1 101 Switching Protocols")
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    with socket.create_connection((HOST, wss_port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=HOST) as tls:
        try:
            tls.sendall(UPGRADE)
            answer = tls.recv(100)
        except (ssl.SSLError, ConnectionError):
            answer = b""
    assert answer == b""
    ctx.load_cert_chain(str(pki["dev-w"].cert), str(pki["dev-w"].key))
    with socket.create_connection((HOST, wss_port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=HOST) as tls:
        tls.sendall(UPGRADE)
        assert tls.recv(100).startswith(b"HTTP/1.1 101")


@pytest.mark.parametrize("protocols", [("foo",), (), ("mqttv3.1",)])
def test_other_subprotocols_are_refused(bridge, protocols) -> None:
    async def attempt() -> int:
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(f"http://{HOST}:{bridge.ws_port}/mqtt",
                                           protocols=protocols):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    assert asyncio.run(attempt()) == 400
    deadline = time.monotonic() + 10
    while "refusing WebSocket" not in bridge.output():
        assert time.monotonic() < deadline, bridge.tail()
        time.sleep(0.05)


def test_text_message_closes_with_1003(bridge) -> None:
    async def attempt() -> int | None:
        async with aiohttp.ClientSession() as http, http.ws_connect(
            f"http://{HOST}:{bridge.ws_port}/mqtt", protocols=("mqtt",)
        ) as ws:
            assert ws.protocol == "mqtt"
            await ws.send_str("hello")
            msg = await ws.receive(timeout=10)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return ws.close_code

    assert asyncio.run(attempt()) == 1003


def test_unknown_path_is_404(bridge) -> None:
    async def attempt() -> int:
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(f"http://{HOST}:{bridge.ws_port}/other",
                                           protocols=("mqtt",)):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    assert asyncio.run(attempt()) == 404


def test_wss_refuses_plain_http(bridge) -> None:
    async def attempt() -> None:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientError):
                async with http.ws_connect(f"http://{HOST}:{bridge.wss_port}/mqtt",
                                           protocols=("mqtt",), timeout=aiohttp.ClientWSTimeout(ws_receive=5)):
                    pass

    asyncio.run(attempt())


@pytest.fixture
def page_server():
    """The hand-written browser client (tests/browser/mqtt_ws_page.html) over HTTP on 127.0.0.1."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(Path(__file__).parent))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/mqtt_ws_page.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_headless_chromium_publishes_and_receives(bridge, module_server, page_server) -> None:
    """Debian's chromium (Playwright) runs a minimal MQTT client over a browser WebSocket."""
    cid = "browser-" + uuid.uuid4().hex[:6]
    stream = "telemetry" + uuid.uuid4().hex[:6]
    url = f"ws://{HOST}:{bridge.ws_port}/mqtt"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            page = browser.new_page()
            page.goto(f"{page_server}?{urllib.parse.urlencode({'url': url, 'cid': cid, 'stream': stream, 'n': 5})}")
            page.wait_for_function("window.mqtt.pubacks.length === 5 || window.mqtt.closed !== null",
                                   timeout=20_000)
            state = page.evaluate("window.mqtt")
            assert state["protocol"] == "mqtt", state
            assert state["connack"] == 0 and state["suback"] == 1, state
            assert sorted(state["pubacks"]) == [100, 101, 102, 103, 104], state
            records = read_topic(module_server.bootstrap, stream, 5)
            assert sorted(r.value for r in records) == [f"browser {k}".encode() for k in range(5)]
            assert {r.key for r in records} == {cid.encode()}

            producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
            for k in range(3):
                producer.send("commands", key=cid.encode(), value=f"open valve {k}".encode())
            producer.flush()
            producer.close()
            page.wait_for_function("window.mqtt.messages.length >= 3 || window.mqtt.closed !== null",
                                   timeout=20_000)
            state = page.evaluate("window.mqtt")
            assert state["messages"] == [[f"devices/{cid}/commands", f"open valve {k}", 1]
                                         for k in range(3)], state
            assert state["closed"] is None and state["error"] is None, state
        finally:
            browser.close()
