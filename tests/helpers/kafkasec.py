"""Helpers for the Kafka listener security tests: certificates made at test time and
logserver processes with TLS and SASL listeners beside a PLAINTEXT one, all on 127.0.0.1."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.serverproc import HOST, ServerProcess, free_port, run_cli
from helpers.tlscerts import CertAuthority, Pem


@dataclass
class Pki:
    """A CA, the server's keystore (key + chain in one PEM file, Kafka's
    ``ssl.keystore.location``), client certificates and an unrelated CA."""

    ca: CertAuthority
    keystore: Path
    server: Pem
    alice: Pem
    alice_expired: Pem
    rogue_ca: CertAuthority
    rogue_alice: Pem

    @classmethod
    def make(cls, directory: Path) -> Pki:
        ca = CertAuthority(directory / "ca", "test-ca")
        server = ca.issue("localhost", server=True)
        keystore = directory / "keystore.pem"
        keystore.write_text(server.key.read_text() + server.cert.read_text())
        rogue = CertAuthority(directory / "rogue", "rogue-ca")
        return cls(ca=ca, keystore=keystore, server=server, alice=ca.issue("alice"),
                   alice_expired=ca.issue("alice", expired=True), rogue_ca=rogue,
                   rogue_alice=rogue.issue("alice"))


@dataclass
class Ports:
    secure: int
    plain: int

    @property
    def secure_bootstrap(self) -> str:
        return f"{HOST}:{self.secure}"

    @property
    def plain_bootstrap(self) -> str:
        return f"{HOST}:{self.plain}"


def start_secure_server(server_factory, protocol: str, settings: dict[str, object],
                        **kwargs: object) -> tuple[ServerProcess, Ports]:
    """A server whose first listener speaks ``protocol`` (the one waited for), with a
    PLAINTEXT listener beside it."""
    ports = Ports(free_port(), free_port())
    listeners = f"{protocol}://{HOST}:{ports.secure},PLAINTEXT://{HOST}:{ports.plain}"
    srv = server_factory(port=ports.secure, settings={"listeners": listeners, **settings},
                         **kwargs)
    return srv, ports


def tls_settings(pki: Pki, client_auth: str = "none") -> dict[str, object]:
    return {"ssl.keystore.location": pki.keystore, "ssl.truststore.location": pki.ca.pem.cert,
            "ssl.client.auth": client_auth}
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36  # API keys
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"  # Kafka's authorizer


def add_user(data_dir: Path, user: str, mechanism: str, password: str) -> None:
    """A SCRAM credential in a server's data directory, made offline with the admin CLI
    (``logserver scram add``, as an operator) before the server starts."""
    secret = data_dir.parent / f"{user}-{mechanism}.pw"
    secret.write_text(password + "\n")
    proc = run_cli(["scram", "add", "--data-dir", str(data_dir), "--user", user,
                    "--mechanism", mechanism, "--password-file", str(secret)])
    assert proc.returncode == 0, proc.stderr
    assert f"added {mechanism} credential for {user}" in proc.stdout
