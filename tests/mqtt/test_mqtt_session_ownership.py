"""A stored session belongs to the identity that made it, durably: after a bridge restart
another authenticated user cannot claim it with the device's client id (0x87), and the
device itself then finds its subscription and the commands queued for it. Real logserver
and bridge processes, paho-mqtt 5 with user names and passwords, kafka-python."""

from __future__ import annotations

import pytest
from helpers.mqtt_procs import BridgeProcess
from helpers.mqtt_sessions import V5Device, stored_session
from helpers.waiting import wait_until
from kafka import KafkaProducer

pytestmark = pytest.mark.timeout(180)

NOT_AUTHORIZED = 0x87


@pytest.fixture
def bridge(request, tmp_path, server) -> BridgeProcess:
    passwords = tmp_path / "passwords"
    passwords.write_text("sensor-7:sensor-7-pw\nmallory:mallory-pw\n")
    # the default policy: user sensor-7 is device sensor-7 (its topics); another user may
    # still connect with that client id, and ownership of the stored session keeps it out
    b = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                      "--credentials-file", str(passwords))
    request.addfinalizer(b.stop)
    b.start()
    return b


def _device(request, bridge: BridgeProcess, user: str, cid: str = "sensor-7") -> V5Device:
    """A persistent (v5, expiry 1 h) client logged in as ``user`` with client id ``cid``."""
    dev = V5Device(cid, bridge.port)
    dev.c.username_pw_set(user, f"{user}-pw")
    request.addfinalizer(dev.c.loop_stop)
    return dev


def _command(bootstrap: str, cid: str, value: bytes) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("commands", key=cid.encode(), value=value).get(10)
    producer.close()


@pytest.mark.parametrize("restart", ["stop", "kill9"])
def test_another_user_cannot_claim_a_stored_session_after_a_restart(request, bridge, server,
                                                                    restart):
    cid = "sensor-7"
    owner = _device(request, bridge, "sensor-7")
    owner.connect()
    assert owner.connack[-1] == (False, 0)
    assert owner.subscribe([f"devices/{cid}/commands"]) == [1]
    wait_until(lambda: (stored_session(server.bootstrap, cid) or {}).get("owner") == ["sensor-7"], what="the session saved with its owner", timeout=20.0)
    owner.stop()
    getattr(bridge, restart)()
    bridge.start()
    _command(server.bootstrap, cid, b"queued-while-away")

    thief = _device(request, bridge, "mallory")
    thief.connect()
    assert thief.connack[-1] == (False, NOT_AUTHORIZED)
    thief.stop()
    # a clean start by the other user may not wipe it either
    wiper = _device(request, bridge, "mallory")
    wiper.c.connect(bridge.host, bridge.port, clean_start=True)
    wiper.c.loop_start()
    wait_until(lambda: wiper.connack, what="the clean-start CONNACK", timeout=20.0)
    assert wiper.connack[-1] == (False, NOT_AUTHORIZED)
    wiper.stop()

    back = _device(request, bridge, "sensor-7")
    back.connect()
    assert back.connack[-1] == (True, 0), "the owner's session is gone"
    wait_until(lambda: back.got, what="the command queued while the device was away", timeout=20.0)
    assert back.got == [(f"devices/{cid}/commands", b"queued-while-away")]
    back.stop()

    # and once more across a restart: the subscription is still the owner's
    bridge.stop()
    bridge.start()
    again = _device(request, bridge, "sensor-7")
    again.connect()
    assert again.connack[-1] == (True, 0)
    _command(server.bootstrap, cid, b"after-second-restart")
    wait_until(lambda: again.got, what="a command through the kept subscription", timeout=20.0)
    assert again.got == [(f"devices/{cid}/commands", b"after-second-restart")]
    again.stop()
