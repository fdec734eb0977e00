"""SCRAM users managed over the Kafka protocol (KIP-554) with confluent-kafka's
AdminClient, on a SASL_SSL listener: add a user, log in as it with kcat, see it described
(mechanisms and iterations only), survive a restart, delete it, and get Kafka's errors
for invalid alterations."""

from __future__ import annotations

import json

import pytest
from helpers.clienthelpers import kcat
from helpers.kafkasec import Pki
from helpers.serverproc import HOST, ServerProcess, free_port, run_cli

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def admin_server(server_factory, tmp_path, pki):
    data = tmp_path / "data"
    pw = tmp_path / "admin.pw"
    pw.write_text("admin-secret\n")
    proc = run_cli(["scram", "add", "--data-dir", str(data), "--user", "admin",
                    "--mechanism", "SCRAM-SHA-256", "--password-file", str(pw)])
    assert proc.returncode == 0, proc.stderr
    port, plain = free_port(), free_port()
    srv: ServerProcess = server_factory(data_dir=data, port=port, settings={
        "listeners": f"SASL_SSL://{HOST}:{port},PLAINTEXT://{HOST}:{plain}",
        "ssl.keystore.location": pki.keystore})
    return srv


def _admin(srv: ServerProcess, pki: Pki, user: str = "admin", password: str = "admin-secret"):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": srv.bootstrap, "security.protocol": "SASL_SSL",
                        "ssl.ca.location": str(pki.ca.pem.cert),
                        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user,
                        "sasl.password": password})


def _kcat_login(kcat_bin, srv, pki, mechanism, user, password):
    return kcat(kcat_bin, srv.bootstrap, "-L", "-m", "10", "-X", "security.protocol=SASL_SSL",
                "-X", f"ssl.ca.location={pki.ca.pem.cert}", "-X", f"sasl.mechanisms={mechanism}",
                "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
                check=False, timeout=30)


@pytest.mark.kcat
def test_add_describe_login_restart_delete(kcat_bin, admin_server, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = _admin(admin_server, pki)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), b"carol-pw"),
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                 4096), b"dave-pw")])
    for future in futures.values():
        assert future.result(30) is None
    described = admin.describe_user_scram_credentials(["carol", "admin"])
    carol = described["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    assert [i.mechanism for i in described["admin"].result(30).scram_credential_infos] == [
        ScramMechanism.SCRAM_SHA_256]
    # What is stored is salted hashes only.
    stored = json.loads((admin_server.data_dir / "__scram_credentials.json").read_text())
    assert sorted(stored["users"]) == ["admin", "carol", "dave"]
    assert "carol-pw" not in json.dumps(stored)

    assert _kcat_login(kcat_bin, admin_server, pki, "SCRAM-SHA-512", "carol",
                       "carol-pw").returncode == 0
    wrong = _kcat_login(kcat_bin, admin_server, pki, "SCRAM-SHA-256", "carol", "carol-pw")
    assert wrong.returncode != 0 and b"invalid credentials" in wrong.stderr  # no 256 credential

    admin_server.restart()
    admin = _admin(admin_server, pki)
    assert _kcat_login(kcat_bin, admin_server, pki, "SCRAM-SHA-256", "dave",
                       "dave-pw").returncode == 0, "a credential was lost in the restart"
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])
    assert futures["carol"].result(30) is None
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    gone = _kcat_login(kcat_bin, admin_server, pki, "SCRAM-SHA-512", "carol", "carol-pw")
    assert gone.returncode != 0 and b"invalid credentials" in gone.stderr


def test_invalid_alterations_get_kafkas_errors(admin_server, pki):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = _admin(admin_server, pki)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                 100), b"pw")])
    with pytest.raises(KafkaException) as info:
        futures["erin"].result(30)
    assert info.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert "Too few iterations" in info.value.args[0].str()
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(KafkaException) as info:
        futures["nobody"].result(30)
    assert info.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    everyone = admin.describe_user_scram_credentials()
    result = everyone.result(30) if hasattr(everyone, "result") else {
        user: f.result(30) for user, f in everyone.items()}
    assert sorted(result) == ["admin"]
