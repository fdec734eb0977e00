"""Failed TLS handshakes on an SSL listener are logged (one line each, peer and reason,
rate-limited) and counted in /metrics, and the listener keeps serving: garbage bytes, a
client that does not trust the server's CA (confluent-kafka), a flood of garbage."""

from __future__ import annotations

import re
import socket
import time
import urllib.request

import pytest
from helpers.kafkasec import Pki, start_secure_server, tls_settings

from commonlib.tls_accept import LOG_LINES, HandshakeFailures

pytestmark = pytest.mark.timeout(120)

METRIC = "kafka_server_socketservermetrics_failed_authentication_total"
LINE = re.compile(r"failed TLS handshake on listener SSL from 127\.0\.0\.1:\d+: (\S+)")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


def failed_handshakes(server) -> int:
    with urllib.request.urlopen(server.admin_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(METRIC + "{") and 'listener="SSL"' in line \
                and 'reason="ssl_handshake"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def wait_for_count(server, expected: int, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    count = failed_handshakes(server)
    while count < expected and time.monotonic() < deadline:
        time.sleep(0.1)
        count = failed_handshakes(server)
    return count


def send_garbage(port: int, payload: bytes = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") -> bytes:
    """Plain bytes to the SSL port; returns what came back before the server closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
        return received


def trusted_client_works(pki: Pki, bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.ca.pem.cert)})
    return bool(admin.list_topics(timeout=20).brokers)


def test_garbage_and_untrusted_ca_are_logged_and_counted(server_factory, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    srv, ports = start_secure_server(server_factory, "SSL", tls_settings(pki))
    assert failed_handshakes(srv) == 0  # the start-up probe's bare connect is no failure
    send_garbage(ports.secure)
    assert wait_for_count(srv, 1) == 1
    # A real client that does not trust the server's certificate: it aborts the handshake
    # with an alert, which is a failed handshake on our side too.
    admin = AdminClient({"bootstrap.servers": ports.secure_bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.rogue_ca.pem.cert),
                         "reconnect.backoff.ms": 5000, "reconnect.backoff.max.ms": 5000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    del admin
    assert wait_for_count(srv, 2) >= 2
    reasons = LINE.findall(srv.output())
    assert reasons[0] in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST"), reasons
    assert any("UNKNOWN_CA" in r or "CERTIFICATE" in r for r in reasons[1:]), reasons
    assert trusted_client_works(pki, ports.secure_bootstrap)  # still serving


def test_a_flood_of_bad_handshakes_is_counted_but_not_logged_line_by_line(server_factory, pki):
    srv, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    flood = 3 * LOG_LINES
    for _ in range(flood):
        send_garbage(ports.secure, b"\x16\x03\x01\x00\x05hello")  # a TLS record of junk
    assert wait_for_count(srv, flood) == flood
    assert len(LINE.findall(srv.output())) == LOG_LINES
    assert trusted_client_works_with_certificate(pki, ports.secure_bootstrap)


def trusted_client_works_with_certificate(pki: Pki, bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.ca.pem.cert),
                         "ssl.certificate.location": str(pki.alice.cert),
                         "ssl.key.location": str(pki.alice.key)})
    return bool(admin.list_topics(timeout=20).brokers)


def test_log_lines_per_window_and_the_summary_of_what_was_not_logged(caplog):
    now = [0.0]
    failures = HandshakeFailures(lines=2, window_s=60.0, clock=lambda: now[0])
    error = OSError("boom")
    with caplog.at_level("WARNING", logger="commonlib.tls_accept"):
        for _ in range(5):
            failures.record("SSL", "127.0.0.1:1", error)
        now[0] = 61.0
        failures.record("SSL", "127.0.0.1:2", error)
    assert failures.counts[("SSL", "ssl_handshake")] == 6
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert messages[2].endswith("boom (3 more failed handshakes were not logged)")
