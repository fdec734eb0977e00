"""Listener security settings the server cannot honour stop start-up with exit code 2 and
one line naming the problem; a listener asked to be secure is never served in plain text."""

from __future__ import annotations

import pytest
from helpers.kafkasec import Pki
from helpers.serverproc import HOST, free_port, run_cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


def _fails(tmp_path, *args: str, expect: str) -> None:
    proc = run_cli(["--log.dirs", str(tmp_path / "data"), *args])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("logserver: "), proc.stderr
    assert expect in lines[0], lines[0]
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").glob("*-0"))


def test_ssl_listener_without_keystore(tmp_path):
    _fails(tmp_path, "--listeners", f"SSL://{HOST}:{free_port()}", expect="ssl.keystore.location")


def test_sasl_ssl_listener_without_keystore(tmp_path):
    _fails(tmp_path, "--listeners", f"SASL_SSL://{HOST}:{free_port()}",
           expect="ssl.keystore.location")


def test_unknown_listener_name(tmp_path):
    _fails(tmp_path, "--listeners", f"CLIENT://{HOST}:{free_port()}",
           expect="listener.security.protocol.map")


def test_mapped_custom_listener_name_needing_a_keystore(tmp_path):
    _fails(tmp_path, "--listeners", f"CLIENT://{HOST}:{free_port()}",
           "--listener.security.protocol.map", "CLIENT:SASL_SSL", expect="CLIENT")


def test_unknown_security_protocol(tmp_path):
    _fails(tmp_path, "--listeners", f"CLIENT://{HOST}:{free_port()}",
           "--listener.security.protocol.map", "CLIENT:KERBEROS", expect="KERBEROS")


def test_unsupported_sasl_mechanism(tmp_path):
    _fails(tmp_path, "--sasl.enabled.mechanisms", "GSSAPI", expect="GSSAPI is not supported")


def test_jks_keystore(tmp_path):
    _fails(tmp_path, "--ssl.keystore.type", "JKS", expect="only PEM")


def test_wrong_key_password(tmp_path, pki):
    _fails(tmp_path, "--listeners", f"SSL://{HOST}:{free_port()}", "--ssl.keystore.location",
           str(pki.keystore), "--ssl.key.password", "nope", "--ssl.keystore.key", "x",
           expect="not both")


def test_missing_keystore_file(tmp_path):
    _fails(tmp_path, "--listeners", f"SSL://{HOST}:{free_port()}", "--ssl.keystore.location",
           str(tmp_path / "missing.pem"), expect="missing.pem")


def test_garbage_keystore_file(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    _fails(tmp_path, "--listeners", f"SSL://{HOST}:{free_port()}", "--ssl.keystore.location",
           str(bad), expect="cannot load the keystore")


def test_required_client_auth_without_truststore(tmp_path, pki):
    _fails(tmp_path, "--listeners", f"SSL://{HOST}:{free_port()}", "--ssl.keystore.location",
           str(pki.keystore), "--ssl.client.auth", "required", expect="ssl.truststore")


def test_two_listeners_on_one_port(tmp_path):
    port = free_port()
    _fails(tmp_path, "--listeners", f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{port}",
           expect=f"port {port}")


def test_advertised_listener_names_no_listener(tmp_path):
    _fails(tmp_path, "--listeners", f"PLAINTEXT://{HOST}:{free_port()}",
           "--advertised.listeners", f"SSL://{HOST}:9093", expect="advertised.listeners")


def test_keystore_as_pem_text_starts(server_factory, pki):
    """Kafka's ssl.keystore.certificate.chain / ssl.keystore.key hold the PEM text itself,
    here joined into one line as a properties file's continuation lines make it."""
    import socket
    import ssl

    port = free_port()
    one_line = lambda path: " ".join(path.read_text().split("\n"))  # noqa: E731
    srv = server_factory(port=port, settings={
        "listeners": f"SSL://{HOST}:{port}",
        "ssl.keystore.certificate.chain": one_line(pki.server.cert),
        "ssl.keystore.key": one_line(pki.server.key)})
    ctx = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    with socket.create_connection((HOST, port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    assert srv.running


def test_keystore_as_pem_text_in_a_properties_file(server_factory, pki, tmp_path):
    """Kafka's documented form: the PEM text in server.properties with backslash
    continuation lines."""
    import socket
    import ssl

    def continued(path):
        return " \\\n    ".join(path.read_text().strip().splitlines())

    port = free_port()
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"listeners=SSL://{HOST}:{port}\n"
                   f"log.dirs={tmp_path / 'data-file'}\n"
                   f"ssl.keystore.type=PEM\n"
                   f"ssl.keystore.certificate.chain={continued(pki.server.cert)}\n"
                   f"ssl.keystore.key={continued(pki.server.key)}\n")
    srv = server_factory(port=port, config_file=cfg, base_flags=False)
    ctx = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    with socket.create_connection((HOST, port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    assert srv.running


def test_mqtt_bridge_needs_a_plaintext_listener(tmp_path):
    _fails(tmp_path, "--listeners", f"SASL_PLAINTEXT://{HOST}:{free_port()}",
           "--mqtt-bridge", f"{HOST}:{free_port()}", expect="--mqtt-bridge needs a PLAINTEXT")


def test_old_tls_version_refused(tmp_path):
    _fails(tmp_path, "--ssl.enabled.protocols", "TLSv1.1,TLSv1.2", expect="TLSv1.1 is not supported")


def test_ssl_enabled_protocols_tls13_only(server_factory, pki):
    import socket
    import ssl

    port = free_port()
    server_factory(port=port, settings={"listeners": f"SSL://{HOST}:{port}",
                                        "ssl.keystore.location": pki.keystore,
                                        "ssl.enabled.protocols": "TLSv1.3"})
    old = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection((HOST, port), timeout=10) as raw, pytest.raises(ssl.SSLError):
        old.wrap_socket(raw, server_hostname="localhost")
    new = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    with socket.create_connection((HOST, port), timeout=10) as raw, \
            new.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() == "TLSv1.3"


def test_per_listener_settings_and_jaas_lines_of_a_kafka_config(server_factory, pki, tmp_path):
    """Kafka's listener.name.<listener>.<setting> overrides; JAAS lines are warned about and
    ignored (users are SCRAM credentials here)."""
    import socket
    import ssl

    from helpers import rawwire as rw

    port, sasl_port = free_port(), free_port()
    cfg = tmp_path / "server.properties"
    cfg.write_text(
        f"listeners=SSL://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}\n"
        f"log.dirs={tmp_path / 'data-per-listener'}\n"
        f"listener.name.ssl.ssl.keystore.location={pki.keystore}\n"
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security"
        ".plain.PlainLoginModule required user_admin=\"x\";\n")
    srv = server_factory(port=port, config_file=cfg, base_flags=False)
    ctx = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    with socket.create_connection((HOST, port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with rw.Conn(sasl_port) as conn:
        res = conn.call(rw.request(17, 1, 1, rw.string("SCRAM-SHA-256")))
        assert res is not None
        reader = rw.Reader(res[1])
        assert reader.i16() == 33  # UNSUPPORTED_SASL_MECHANISM: only PLAIN on this listener
        assert [reader.string() for _ in range(reader.i32())] == ["PLAIN"]
    assert "ignoring Kafka setting listener.name.sasl_plaintext.plain.sasl.jaas.config" \
        in srv.output()


def test_per_listener_setting_for_no_listener(tmp_path, pki):
    _fails(tmp_path, "--listeners", f"PLAINTEXT://{HOST}:{free_port()}", "--override",
           f"listener.name.ssl.ssl.keystore.location={pki.keystore}", expect="listener.name.ssl")
