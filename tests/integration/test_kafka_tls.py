"""SSL listeners with real clients: kafka-python (client certificate), kcat
(librdkafka), confluent-kafka; a PLAINTEXT listener beside the SSL one; a client with an
expired certificate or one that does not trust the server's CA gets its normal error;
record bytes above the sendfile threshold go through TLS intact (read+write fallback);
the certificate's subject becomes the principal, formatted as Kafka formats it."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest
from helpers.clienthelpers import kcat, kp_produce, kp_read
from helpers.kafkasec import Pki, start_secure_server, tls_settings
from kafka.errors import KafkaTimeoutError

from logserver.security.listeners import ListenerSecurity
from logserver.security.session import ConnectionSecurity
from logserver.security.tls import subject_dn

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


def kp_ssl(pki: Pki, cert=None, cafile=None) -> dict[str, object]:
    cert = cert or pki.alice
    return {"security_protocol": "SSL", "ssl_cafile": str(cafile or pki.ca.pem.cert),
            "ssl_certfile": str(cert.cert), "ssl_keyfile": str(cert.key),
            "ssl_check_hostname": True}


def kcat_ssl(pki: Pki, cert=None, cafile=None) -> list[str]:
    cert = cert or pki.alice
    return ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={cafile or pki.ca.pem.cert}",
            "-X", f"ssl.certificate.location={cert.cert}", "-X", f"ssl.key.location={cert.key}"]


def test_kafka_python_with_client_certificate_and_plaintext_alongside(server_factory, pki,
                                                                      topic_name):
    srv, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    sent = [{"key": b"k%d" % i, "value": b"over tls %d" % i} for i in range(20)]
    kp_produce(ports.secure_bootstrap, topic_name, sent, producer_config=kp_ssl(pki))
    got = kp_read(ports.secure_bootstrap, topic_name, consumer_config=kp_ssl(pki))
    assert [(r.key, r.value) for r in got] == [(s["key"], s["value"]) for s in sent]
    # The PLAINTEXT listener serves the same log, in plain text.
    plain = kp_read(ports.plain_bootstrap, topic_name)
    assert [r.value for r in plain] == [s["value"] for s in sent]
    assert "(SSL, SSL)" in srv.output() and "(PLAINTEXT, PLAINTEXT)" in srv.output()


def test_large_fetch_over_tls_is_intact(server_factory, pki, topic_name):
    """Fetch responses far above the sendfile threshold: read and written in chunks."""
    srv, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "requested"))
    sent = [{"value": bytes([i]) * 200_000} for i in range(12)]  # 2.4 MB
    tls = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca.pem.cert)}
    # Produce requests of ~1 MB through TLS too (frames far above the staging buffer).
    kp_produce(ports.secure_bootstrap, topic_name, sent[:6],
               producer_config={**tls, "batch_size": 1 << 20, "linger_ms": 50,
                                "max_request_size": 4 << 20})
    kp_produce(ports.plain_bootstrap, topic_name, sent[6:])
    got = kp_read(ports.secure_bootstrap, topic_name, consumer_config={
        **tls, "max_partition_fetch_bytes": 4 << 20, "fetch_max_bytes": 8 << 20})
    assert [r.value for r in got] == [s["value"] for s in sent]
    srv.stop()
    assert "sendfile: 0 calls" in srv.output(), "sendfile must not be used on a TLS socket"


@pytest.mark.kcat
def test_kcat_over_ssl(kcat_bin, server_factory, pki, topic_name):
    _, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    kcat(kcat_bin, ports.secure_bootstrap, "-P", "-t", topic_name, *kcat_ssl(pki),
         input=b"one\ntwo\n")
    out = kcat(kcat_bin, ports.secure_bootstrap, "-C", "-t", topic_name, "-e", *kcat_ssl(pki))
    assert out.stdout.split() == [b"one", b"two"]
    meta = kcat(kcat_bin, ports.secure_bootstrap, "-L", *kcat_ssl(pki)).stdout.decode()
    # Metadata advertises the listener the request came in on, not the first one.
    assert f"127.0.0.1:{ports.secure}" in meta and f":{ports.plain}" not in meta, meta


def test_expired_client_certificate_is_refused(server_factory, pki, topic_name):
    _, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        kp_produce(ports.secure_bootstrap, topic_name, [{"value": b"x"}],
                   producer_config={**kp_ssl(pki, cert=pki.alice_expired),
                                    "bootstrap_timeout_ms": 4000})


@pytest.mark.kcat
def test_expired_client_certificate_kcat_error(kcat_bin, server_factory, pki):
    _, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    proc = kcat(kcat_bin, ports.secure_bootstrap, "-L", "-m", "5",
                *kcat_ssl(pki, cert=pki.alice_expired), check=False, timeout=30)
    assert proc.returncode != 0
    # The TLS handshake fails (the alert itself is not flushed by asyncio/uvloop before
    # the close, so librdkafka reports the TLS failure as an unexpected EOF).
    assert b"SSL routines" in proc.stderr and b"Failed to acquire metadata" in proc.stderr, \
        proc.stderr
    good = kcat(kcat_bin, ports.secure_bootstrap, "-L", *kcat_ssl(pki))
    assert b"1 brokers" in good.stdout


def test_client_certificate_from_untrusted_ca_is_refused(server_factory, pki, topic_name):
    _, ports = start_secure_server(server_factory, "SSL", tls_settings(pki, "required"))
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        kp_produce(ports.secure_bootstrap, topic_name, [{"value": b"x"}],
                   producer_config={**kp_ssl(pki, cert=pki.rogue_alice),
                                    "bootstrap_timeout_ms": 4000})


def test_confluent_client_not_trusting_the_server_ca(server_factory, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    _, ports = start_secure_server(server_factory, "SSL", tls_settings(pki))
    errors: list[str] = []
    admin = AdminClient({"bootstrap.servers": ports.secure_bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.rogue_ca.pem.cert),
                         "error_cb": lambda err: errors.append(str(err))})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # serves error_cb
    assert any("certificate verify failed" in e for e in errors), errors
    trusting = AdminClient({"bootstrap.servers": ports.secure_bootstrap,
                            "security.protocol": "SSL", "ssl.ca.location": str(pki.ca.pem.cert)})
    assert trusting.list_topics(timeout=20).brokers


def test_certificate_subject_is_the_principal(pki, tmp_path):
    """A real TLS handshake: the verified client certificate's subject, as Kafka prints it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme, inc"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    import datetime as dt
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(pki.ca.name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
            .sign(pki.ca.key, hashes.SHA256()))
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "c.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.keystore)
    server_ctx.load_verify_locations(pki.ca.pem.cert)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    client_ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "c.key")
    a, b = socket.socketpair()
    peer: dict = {}

    def serve() -> None:
        with server_ctx.wrap_socket(a, server_side=True) as tls:
            peer.update(tls.getpeercert())

    thread = threading.Thread(target=serve)
    thread.start()
    with client_ctx.wrap_socket(b, server_hostname="localhost"):
        thread.join(10)
    assert subject_dn(peer) == "CN=alice,O=acme\\, inc,C=DE"
    listener = ListenerSecurity(name="SSL", protocol="SSL")
    assert ConnectionSecurity(listener, subject_dn(peer)).principal == "User:CN=alice,O=acme\\, inc,C=DE"
    assert ConnectionSecurity(listener, None).principal == "User:ANONYMOUS"
    sasl = ListenerSecurity(name="SASL_SSL", protocol="SASL_SSL")
    assert ConnectionSecurity(sasl, subject_dn(peer)).principal == "User:ANONYMOUS"
