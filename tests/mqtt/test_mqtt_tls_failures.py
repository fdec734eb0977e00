"""Failed TLS handshakes on the MQTT bridge's TLS listener are logged (peer and reason)
and counted (``mqtt_tls_handshake_failures_total``), and the listener keeps serving:
mosquitto_pub trusting another CA, plain MQTT on the TLS port."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
import uuid

import pytest
from helpers.mqtt_procs import BridgeProcess
from helpers.tlscerts import CertAuthority
from prometheus_client.parser import text_string_to_metric_families

from commonlib.childproc import HOST, free_port

pytestmark = pytest.mark.timeout(120)

METRIC = "mqtt_tls_handshake_failures_total"
LINE = re.compile(r"failed TLS handshake on listener MQTT-TLS from 127\.0\.0\.1:\d+: (\S+)")


def failures(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return next(s.value for family in text_string_to_metric_families(text)
                for s in family.samples if s.name == METRIC)


def test_failed_mqtt_tls_handshakes_are_logged_and_counted(request, module_server, tmp_path):
    ca = CertAuthority(tmp_path / "pki")
    server_cert = ca.issue("127.0.0.1", server=True)
    other_ca = CertAuthority(tmp_path / "other", "other-ca")
    tls_port, admin_port = free_port(), free_port()
    log_path = tmp_path / "bridge.log"
    bridge = BridgeProcess(
        module_server.bootstrap, log_path, "--log-format", "text",
        "--tls-listen", f"{HOST}:{tls_port}", "--tls-certfile", str(server_cert.cert),
        "--tls-keyfile", str(server_cert.key), "--admin-listen", f"{HOST}:{admin_port}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    url = f"http://{HOST}:{admin_port}"
    assert failures(url) == 0
    tag = uuid.uuid4().hex[:8]

    def pub(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(tls_port), *args, "-q", "1",
                               "-i", f"dev-{tag}", "-t", f"devices/dev-{tag}/telemetry",
                               "-m", "x"], capture_output=True, text=True, timeout=20)

    assert pub("--cafile", str(other_ca.pem.cert)).returncode != 0  # does not trust us
    assert pub().returncode != 0  # plain MQTT to the TLS port
    deadline = time.monotonic() + 20
    while failures(url) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert failures(url) == 2
    deadline = time.monotonic() + 20
    while len(LINE.findall(log_path.read_text())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    reasons = LINE.findall(log_path.read_text())
    assert len(reasons) == 2 and "UNKNOWN_CA" in reasons[0], reasons
    ok = pub("--cafile", str(ca.pem.cert))  # still serving
    assert ok.returncode == 0, ok.stderr


WSS_LINE = re.compile(r"failed TLS handshake on listener MQTT-WSS from 127\.0\.0\.1:\d+: (\S+)")


def test_failed_wss_handshakes_are_logged_and_counted(request, module_server, tmp_path):
    """The WebSocket TLS listener (--wss-listen) logs and counts its failed handshakes like
    the MQTT TLS listener: a client trusting another CA, plain HTTP garbage on the port;
    a good paho client over wss still gets in afterwards."""
    import socket
    import ssl

    import paho.mqtt.client as paho

    ca = CertAuthority(tmp_path / "pki")
    server_cert = ca.issue("127.0.0.1", server=True)
    other_ca = CertAuthority(tmp_path / "other", "other-ca")
    wss_port, admin_port = free_port(), free_port()
    log_path = tmp_path / "bridge.log"
    bridge = BridgeProcess(
        module_server.bootstrap, log_path, "--log-format", "text",
        "--wss-listen", f"{HOST}:{wss_port}", "--tls-certfile", str(server_cert.cert),
        "--tls-keyfile", str(server_cert.key), "--admin-listen", f"{HOST}:{admin_port}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    url = f"http://{HOST}:{admin_port}"
    deadline = time.monotonic() + 20
    while "WebSocket TLS listener" not in log_path.read_text():
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.05)
    assert failures(url) == 0

    foreign = ssl.create_default_context(cafile=str(other_ca.pem.cert))
    with socket.create_connection((HOST, wss_port), timeout=10) as raw, \
            pytest.raises(ssl.SSLError):
        foreign.wrap_socket(raw, server_hostname=HOST)  # does not trust us
    with socket.create_connection((HOST, wss_port), timeout=10) as raw:
        raw.sendall(b"GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP on the TLS port
        raw.settimeout(10)
        with pytest.raises(ConnectionError):
            while raw.recv(100):  # the answer, if any, is a TLS alert; then the close
                pass
            raise ConnectionResetError("closed")
    deadline = time.monotonic() + 20
    while failures(url) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert failures(url) == 2
    deadline = time.monotonic() + 20
    while len(WSS_LINE.findall(log_path.read_text())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    reasons = WSS_LINE.findall(log_path.read_text())
    assert len(reasons) == 2 and "UNKNOWN_CA" in reasons[0], reasons

    connected: list[object] = []
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"wss-{uuid.uuid4().hex[:8]}",
                         transport="websockets", protocol=paho.MQTTv5)
    client.ws_set_options(path="/mqtt")
    client.tls_set(ca_certs=str(ca.pem.cert))
    client.on_connect = lambda c, u, f, rc, p=None: connected.append(rc)
    client.connect(HOST, wss_port)
    client.loop_start()
    try:
        deadline = time.monotonic() + 20
        while not connected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connected and not connected[0].is_failure, connected  # still serving
    finally:
        client.disconnect()
        client.loop_stop()
    assert failures(url) == 2
