"""Per-address limits against brute force and bursts: failed SASL and MQTT logins slow
down their own address's next logins (doubling, capped), never another address's; the
bridge's connection rate is counted per address. The sans-I/O tables first, then real
servers: SASL over raw wire, paho-mqtt against a bridge with a password file."""

from __future__ import annotations

import socket
import time
import urllib.request

import paho.mqtt.client as paho
import pytest
from helpers import rawwire as rw
from helpers.kafkasec import SASL_AUTHENTICATE, SASL_HANDSHAKE, add_user
from helpers.mqtt_procs import BridgeProcess
from helpers.serverproc import HOST, free_port
from helpers.waiting import wait_until

from commonlib.source_limits import ConnectionRate, LoginBackoff

pytestmark = pytest.mark.timeout(120)
OTHER = "127.0.0.2"  # a second loopback address: another client


# ---- the tables, without sockets ------------------------------------------------------

def test_failures_double_the_wait_up_to_the_cap_and_a_success_clears_it():
    backoff = LoginBackoff(0.1, 0.4)
    assert backoff.wait("a", 0.0) == 0.0
    backoff.failed("a", 0.0)
    assert backoff.wait("a", 0.0) == pytest.approx(0.1)
    backoff.failed("a", 0.1)
    backoff.failed("a", 0.1)
    backoff.failed("a", 0.1)
    assert backoff.wait("a", 0.1) == pytest.approx(0.4)  # 0.8 capped
    assert backoff.wait("b", 0.1) == 0.0
    backoff.succeeded("a")
    assert backoff.wait("a", 0.2) == 0.0
    assert backoff.delayed_total == 2 and backoff.failures_total == 4


def test_attempts_in_parallel_from_one_address_are_lined_up():
    backoff = LoginBackoff(1.0, 8.0)
    backoff.failed("a", 0.0)
    assert [backoff.wait("a", 0.0) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_an_address_quiet_for_longer_than_the_cap_is_forgiven():
    backoff = LoginBackoff(1.0, 4.0)
    backoff.failed("a", 0.0)
    assert backoff.wait("a", 100.0) == 0.0
    assert backoff.wait("a", 100.0) == 0.0


def test_tables_are_bounded():
    backoff = LoginBackoff(1.0, 4.0, max_sources=10)
    rate = ConnectionRate(1, max_sources=10)
    for i in range(1000):
        backoff.failed(f"10.0.{i // 256}.{i % 256}", 0.0)
        rate.take(f"10.0.{i // 256}.{i % 256}", 0.0)
    assert len(backoff._sources) == 10 and len(rate._buckets) == 10


def test_one_addresses_burst_leaves_the_others_bucket_full():
    rate = ConnectionRate(5)
    assert [rate.take("a", 0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    assert rate.take("b", 0.0)
    assert rate.take("a", 0.2)  # a second's worth refills at the rate


# ---- SASL on a real server --------------------------------------------------------------

def _sasl_plain(port: int, password: str, source: str | None = None) -> int:
    """One PLAIN login over raw wire: its SaslAuthenticate error code."""
    with rw.Conn(port, timeout=30, source=source) as conn:
        res = conn.call(rw.request(SASL_HANDSHAKE, 1, 1, rw.string("PLAIN")))
        assert res is not None
        token = b"\0alice\0" + password.encode()
        res = conn.call(rw.request(SASL_AUTHENTICATE, 0, 2, rw.nbytes(token)))
        assert res is not None
        return rw.Reader(res[1]).i16()


def _metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def test_failed_sasl_logins_slow_down_their_address_only(server_factory, tmp_path):
    data = tmp_path / "data"
    add_user(data, "alice", "SCRAM-SHA-256", "right")
    port = free_port()
    srv = server_factory(data_dir=data, port=port, settings={
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port}", "sasl.enabled.mechanisms": "PLAIN",
        "connection.failed.authentication.delay.ms": 200,
        "connection.failed.authentication.delay.max.ms": 800})
    started = time.monotonic()
    for _ in range(3):
        assert _sasl_plain(port, "wrong") == 58  # SASL_AUTHENTICATION_FAILED
    assert _sasl_plain(port, "right") == 0
    # each failure's reply waits 200 ms, and the next login from the address 200, 400, 800
    assert time.monotonic() - started >= 3 * 0.2 + 0.2 + 0.4 + 0.8
    delayed = "kafka_server_socketservermetrics_failed_authentication_delayed_total"
    before = _metric(srv.admin_url, delayed)
    # another address logs in without waiting: no delay is counted for it
    assert _sasl_plain(port, "right", source=OTHER) == 0
    # and the success cleared 127.0.0.1: its next login is not held back either
    assert _sasl_plain(port, "right") == 0
    assert _metric(srv.admin_url, delayed) == before
    failed = 'kafka_server_socketservermetrics_failed_authentication_total{listener="SASL_PLAINTEXT",reason="sasl"}'
    assert _metric(srv.admin_url, failed) == 3


# ---- the MQTT bridge --------------------------------------------------------------------

@pytest.fixture
def bridge(request, server, tmp_path) -> BridgeProcess:
    passwords = tmp_path / "passwords"
    passwords.write_text("dev1:right\n")
    admin = free_port()
    b = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--credentials-file",
                      str(passwords), "--failed-login-delay-ms", "200",
                      "--failed-login-delay-max-ms", "800", "--max-connection-rate", "5",
                      "--admin-listen", f"{HOST}:{admin}")
    request.addfinalizer(b.stop)
    b.start()
    b.admin_url = f"http://{HOST}:{admin}"  # type: ignore[attr-defined]
    return b


def _mqtt_login(port: int, password: str, source: str = "") -> int:
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="dev1",
                         protocol=paho.MQTTv5)
    client.username_pw_set("dev1", password)
    result: list[int] = []
    client.on_connect = lambda c, u, flags, reason, props: result.append(reason.value)
    client.connect(HOST, port, bind_address=source)
    client.loop_start()
    try:
        return wait_until(lambda: result, 30, "the CONNACK")[0] or 0
    finally:
        client.disconnect()
        client.loop_stop()


def test_failed_mqtt_logins_slow_down_their_address_only(bridge):
    started = time.monotonic()
    for _ in range(3):
        assert _mqtt_login(bridge.port, "wrong") == 0x86  # bad user name or password
    assert _mqtt_login(bridge.port, "right") == 0
    assert time.monotonic() - started >= 0.2 + 0.4 + 0.8  # the waits after each failure
    assert _metric(bridge.admin_url, "mqtt_login_failures_total") == 3
    before = _metric(bridge.admin_url, "mqtt_logins_delayed_total")
    assert _mqtt_login(bridge.port, "right", source=OTHER) == 0
    assert _mqtt_login(bridge.port, "right") == 0  # the success cleared 127.0.0.1
    assert _metric(bridge.admin_url, "mqtt_logins_delayed_total") == before


def test_one_addresses_connection_burst_does_not_lock_out_another(bridge):
    burst = [socket.create_connection((HOST, bridge.port), timeout=10) for _ in range(30)]
    try:
        wait_until(lambda: "connection rate above 5/s from 127.0.0.1" in bridge.output(), 30,
                   "the bridge to refuse part of the burst")
        assert _mqtt_login(bridge.port, "right", source=OTHER) == 0
    finally:
        for sock in burst:
            sock.close()
