"""A cluster whose brokers have a SASL_PLAINTEXT listener for clients beside the
PLAINTEXT one their followers use (``inter.broker.listener.name``), SCRAM users and
Kafka's StandardAuthorizer: the set-up of every cluster security test."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from helpers.clusterprocs import Cluster
from helpers.serverproc import HOST, ServerProcess, free_port, run_cli

MECHANISM = "SCRAM-SHA-256"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def add_user(data_dir: Path, user: str, password: str) -> None:
    """A SCRAM user in a broker's data directory, through the admin CLI (as an operator)."""
    secret = data_dir.parent / f"{data_dir.name}-{user}.pw"
    secret.write_text(password + "\n")
    proc = run_cli(["scram", "add", "--data-dir", str(data_dir), "--user", user,
                    "--mechanism", MECHANISM, "--password-file", str(secret)])
    assert proc.returncode == 0, proc.stderr


def add_sasl_listeners(nodes: Cluster, super_users: str, users: Mapping[str, str] = {},
                       **settings: object) -> dict[int, int]:
    """Turn the brokers of a cluster not yet started into SASL ones; returns each
    node's SASL port."""
    sasl_ports: dict[int, int] = {}
    for node, plain in list(nodes.brokers.items()):
        assert plain.data_dir is not None
        for user, password in users.items():
            add_user(plain.data_dir, user, password)
        port, sasl = free_port(), free_port()
        sasl_ports[node] = sasl
        nodes.brokers[node] = ServerProcess(plain.data_dir, port=port, settings={
            **plain.settings,
            "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl}",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM,
            "authorizer.class.name": AUTHORIZER,
            "super.users": super_users,
            **settings})
    return sasl_ports
