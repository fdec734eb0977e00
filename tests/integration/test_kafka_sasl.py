"""SASL listeners with real clients and real server processes (users created with the
offline ``logserver scram add`` before start): kcat and confluent-kafka with
SASL_SSL + SCRAM-SHA-256/512, kafka-python with SASL PLAIN, aiokafka with SCRAM; wrong
passwords get each client's normal error; before authentication only ApiVersions and
the SASL requests are served and frames above 512 KiB close the connection; the legacy
v0 handshake with bare tokens; a PLAINTEXT listener beside them keeps working."""

from __future__ import annotations

import asyncio
import logging
import struct
import time

import pytest
from helpers import rawwire as rw
from helpers.clienthelpers import kcat, kp_produce, kp_read
from helpers.kafkasec import SASL_AUTHENTICATE, SASL_HANDSHAKE, Pki, add_user
from helpers.serverproc import HOST, ServerProcess, free_port, run_cli
from kafka.errors import KafkaTimeoutError

pytestmark = pytest.mark.timeout(180)

USERS = {"alice": "alice-secret", "bob": "bob's secret, with = and ,"}


class Ports:
    def __init__(self) -> None:
        self.sasl_ssl, self.sasl_plain, self.plain = free_port(), free_port(), free_port()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def sasl(request, tmp_path_factory, pki):
    """One server: SASL_SSL, SASL_PLAINTEXT and PLAINTEXT listeners; alice has both SCRAM
    mechanisms, bob only SCRAM-SHA-256."""
    base = tmp_path_factory.mktemp("sasl-server")
    data = base / "data"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        add_user(data, "alice", mechanism, USERS["alice"])
    add_user(data, "bob", "SCRAM-SHA-256", USERS["bob"])
    ports = Ports()
    srv = ServerProcess(data, port=ports.sasl_ssl, settings={
        "listeners": f"SASL_SSL://{HOST}:{ports.sasl_ssl},SASL_PLAINTEXT://{HOST}:"
                     f"{ports.sasl_plain},PLAINTEXT://{HOST}:{ports.plain}",
        "ssl.keystore.location": pki.keystore,
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        # This module's tests share the server and several fail logins from 127.0.0.1 on
        # purpose; the doubling backoff (test_login_backoff.py) would hold a later test's
        # handshake past its read timeout, depending on the order xdist runs them in.
        "connection.failed.authentication.delay.max.ms": "400"})
    request.addfinalizer(srv.stop)
    srv.start()
    srv.ports = ports  # type: ignore[attr-defined]
    return srv


def kcat_sasl(pki: Pki, mechanism: str, user: str = "alice", password: str | None = None):
    return ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki.ca.pem.cert}",
            "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={USERS[user] if password is None else password}"]


@pytest.mark.kcat
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_sasl_ssl_scram(kcat_bin, sasl, pki, topic_name, mechanism):
    bootstrap = f"{HOST}:{sasl.ports.sasl_ssl}"
    kcat(kcat_bin, bootstrap, "-P", "-t", topic_name, *kcat_sasl(pki, mechanism),
         input=b"a\nb\nc\n")
    out = kcat(kcat_bin, bootstrap, "-C", "-t", topic_name, "-e", *kcat_sasl(pki, mechanism))
    assert out.stdout.split() == [b"a", b"b", b"c"]
    # The PLAINTEXT listener beside it serves the same log.
    assert [r.value for r in kp_read(f"{HOST}:{sasl.ports.plain}", topic_name)] == [
        b"a", b"b", b"c"]


@pytest.mark.kcat
def test_kcat_wrong_password(kcat_bin, sasl, pki):
    proc = kcat(kcat_bin, f"{HOST}:{sasl.ports.sasl_ssl}", "-L", "-m", "5",
                *kcat_sasl(pki, "SCRAM-SHA-256", password="wrong"), check=False, timeout=30)
    assert proc.returncode != 0
    assert (b"SASL authentication error: Authentication failed during authentication due to "
            b"invalid credentials with SASL mechanism SCRAM-SHA-256") in proc.stderr, proc.stderr


def _confluent(sasl, pki, mechanism: str, user: str, password: str, **extra):
    return {"bootstrap.servers": f"{HOST}:{sasl.ports.sasl_ssl}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca.pem.cert), "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password, **extra}


def test_confluent_sasl_ssl_scram_sha512_group_consumer(sasl, pki, topic_name):
    from confluent_kafka import Consumer, Producer

    producer = Producer(_confluent(sasl, pki, "SCRAM-SHA-512", "alice", USERS["alice"]))
    for i in range(10):
        producer.produce(topic_name, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer(_confluent(sasl, pki, "SCRAM-SHA-512", "alice", USERS["alice"],
                                   **{"group.id": f"g-{topic_name}",
                                      "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([topic_name])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"v%d" % i for i in range(10)]
    finally:
        consumer.close()


def test_confluent_wrong_password_and_missing_mechanism(sasl, pki):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    for mechanism, user, password in (("SCRAM-SHA-512", "alice", "wrong"),
                                      ("SCRAM-SHA-512", "bob", USERS["bob"]),  # no 512 credential
                                      ("SCRAM-SHA-256", "mallory", "x")):
        errors: list[KafkaError] = []
        admin = AdminClient(_confluent(sasl, pki, mechanism, user, password,
                                       error_cb=errors.append))
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            admin.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION and
                   "invalid credentials with SASL mechanism " + mechanism in e.str()
                   for e in errors), [str(e) for e in errors]


def test_kafka_python_sasl_plain(sasl, topic_name, caplog):
    bootstrap = f"{HOST}:{sasl.ports.sasl_plain}"
    config = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "bob", "sasl_plain_password": USERS["bob"]}
    # A record far above 512 KiB: the limit is for unauthenticated frames only.
    big = b"x" * 700_000
    kp_produce(bootstrap, topic_name, [{"value": b"small"}, {"value": big}],
               producer_config={**config, "max_request_size": 2 << 20})
    got = kp_read(bootstrap, topic_name, consumer_config=config)
    assert [r.value for r in got] == [b"small", big]
    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        kp_produce(bootstrap, topic_name, [{"value": b"x"}], producer_config={
            **config, "sasl_plain_password": "wrong", "bootstrap_timeout_ms": 4000})
    assert "Authentication failed: Invalid username or password" in caplog.text
    assert "SaslAuthenticationFailed" in caplog.text


def test_aiokafka_scram(sasl, pki, topic_name, caplog):
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.errors import KafkaConnectionError

    context = ssl.create_default_context(cafile=str(pki.ca.pem.cert))
    common = {"bootstrap_servers": f"{HOST}:{sasl.ports.sasl_ssl}",
              "security_protocol": "SASL_SSL", "ssl_context": context,
              "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob"}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**common, sasl_plain_password=USERS["bob"])
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic_name, b"aio%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**common, sasl_plain_password=USERS["bob"])
        await consumer.start()
        try:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            while len(values) < 5:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                values += [m.value for msgs in batch.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"aio%d" % i for i in range(5)]

    async def wrong() -> None:
        producer = AIOKafkaProducer(**common, sasl_plain_password="wrong")
        try:
            await producer.start()
        finally:
            await producer.stop()

    caplog.set_level(logging.ERROR, logger="aiokafka")
    with pytest.raises(KafkaConnectionError):
        asyncio.run(wrong())
    assert "SaslAuthenticationFailed: Authentication failed during authentication due to " \
           "invalid credentials with SASL mechanism SCRAM-SHA-256" in caplog.text


# ---- the wire before authentication --------------------------------------------------


def _handshake(conn: rw.Conn, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    res = conn.call(rw.request(SASL_HANDSHAKE, version, 11, rw.string(mechanism)))
    assert res is not None, "connection closed on SaslHandshake"
    reader = rw.Reader(res[1])
    error = reader.i16()
    return error, [reader.string() for _ in range(reader.i32())]


def _authenticate_v0(conn: rw.Conn, token: bytes) -> tuple[int, str | None, bytes] | None:
    res = conn.call(rw.request(SASL_AUTHENTICATE, 0, 12, rw.nbytes(token)))
    if res is None:
        return None
    reader = rw.Reader(res[1])
    error, message = reader.i16(), reader.string()
    size = reader.i32()
    return error, message, reader.take(f"{size}s") if size > 0 else b""


def test_only_sasl_requests_before_authentication(sasl):
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        keys = rw.api_versions_ok(conn=conn)  # ApiVersions is allowed
        assert keys[SASL_HANDSHAKE] == (0, 1) and keys[SASL_AUTHENTICATE] == (0, 2)
        assert conn.call(rw.request(rw.API_METADATA, 4, 3, rw.metadata_v4(None, False))) is None
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "PLAIN") == (0, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        assert conn.call(rw.request(rw.API_METADATA, 4, 3, rw.metadata_v4(None, False))) is None
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "PLAIN")[0] == 0
        assert _authenticate_v0(conn, b"\0bob\0" + USERS["bob"].encode()) == (0, None, b"")
        res = conn.call(rw.request(rw.API_METADATA, 4, 3, rw.metadata_v4(None, False)))
        assert res is not None and res[0] == 3, "authenticated, Metadata must be served"
        again = _authenticate_v0(conn, b"\0bob\0x")
        assert again is not None and again[0] == 34  # ILLEGAL_SASL_STATE


def test_unsupported_mechanism_answered_then_closed(sasl):
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "GSSAPI") == (33, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        assert conn.closed_by_server()


def test_failed_authentication_answered_then_closed(sasl):
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "PLAIN")[0] == 0
        reply = _authenticate_v0(conn, b"\0bob\0wrong")
        assert reply == (58, "Authentication failed: Invalid username or password", b"")
        assert conn.closed_by_server()
    assert "Failed authentication with /127.0.0.1 (Authentication failed: Invalid username " \
           "or password) on listener SASL_PLAINTEXT" in sasl.output()


def test_oversize_frame_before_authentication_closes(sasl):
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        rw.api_versions_ok(conn=conn)
        # Announce 512 KiB + 1 and send only the header: closed without waiting for the rest.
        header = rw.request(rw.API_METADATA, 4, 5, b"")[4:]
        assert conn.send(struct.pack(">i", 512 * 1024 + 1) + header)
        assert conn.closed_by_server(timeout=10)
    with rw.Conn(sasl.ports.plain) as conn:  # the PLAINTEXT listener: no such limit
        header = rw.request(rw.API_METADATA, 4, 5, b"")[4:]
        conn.send(struct.pack(">i", 512 * 1024 + 1) + header)
        assert not conn.closed_by_server(timeout=1)
    assert "frame size 524289 outside 8..524288" in sasl.output()


def test_legacy_v0_handshake_with_bare_tokens(sasl):
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "PLAIN", version=0)[0] == 0
        token = b"\0alice\0" + USERS["alice"].encode()
        assert conn.send(struct.pack(">i", len(token)) + token)
        assert conn.recv_frame() == b""  # an empty bare token: authenticated
        res = conn.call(rw.request(rw.API_METADATA, 4, 9, rw.metadata_v4(None, False)))
        assert res is not None and res[0] == 9
    with rw.Conn(sasl.ports.sasl_plain) as conn:
        assert _handshake(conn, "PLAIN", version=0)[0] == 0
        token = b"\0alice\0wrong"
        conn.send(struct.pack(">i", len(token)) + token)
        assert conn.closed_by_server()  # no way to say no in this framing: closed


def test_sasl_handshake_on_plaintext_listener(sasl):
    with rw.Conn(sasl.ports.plain) as conn:
        assert _handshake(conn, "PLAIN") == (34, [])  # ILLEGAL_SASL_STATE, as Kafka


# ---- the offline command -----------------------------------------------------------


def test_scram_cli_errors(sasl, tmp_path):
    proc = run_cli(["scram", "--help"])
    assert proc.returncode == 0 and "add" in proc.stdout and "list" in proc.stdout
    pw = tmp_path / "pw"
    pw.write_text("x\n")
    proc = run_cli(["scram", "add", "--data-dir", str(sasl.data_dir), "--user", "carol",
                    "--mechanism", "SCRAM-SHA-256", "--password-file", str(pw)])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "in use" in lines[0] and "AlterUserScramCredentials" in lines[0]
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for args, expect in (
            (["--password-file", str(empty)], "the password is empty"),
            (["--password-file", str(tmp_path / "missing")], "No such file"),
            (["--password-file", str(pw), "--iterations", "100"], "--iterations must be")):
        proc = run_cli(["scram", "add", "--data-dir", str(tmp_path / "d"), "--user", "u",
                        "--mechanism", "SCRAM-SHA-256", *args])
        assert proc.returncode == 2 and expect in proc.stderr, proc.stderr
    proc = run_cli(["scram", "list", "--data-dir", str(tmp_path / "nope")])
    assert proc.returncode == 2 and "not a directory" in proc.stderr
