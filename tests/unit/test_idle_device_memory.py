"""Issue 27: an idle MQTT device costs the bridge as little as possible. A session holds
no collection of its own until it is written to (the shared read-only empties stand in),
the packet reader holds no buffer between packets, and an idle bridge has not imported
what only the WebSocket listener or the admin API use. The lazy paths still work:
the first write makes the session's own collection, a split packet is kept until whole."""

from __future__ import annotations

import subprocess
import sys

import pytest

from commonlib.childproc import python_path_env
from mqtt_bridge.codec import Connect, PacketReader, Pingreq, encode
from mqtt_bridge.session import EMPTY_DICT, NO_HELD, NO_QUEUE, OutMessage, Session


class _Outlet:
    """The connection side a session sends through: records what it was given."""

    closing = False
    send_quota = 10
    backed_up = False

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, int]] = []

    def fits(self, msg: OutMessage, qos: int) -> bool:
        return True

    def send_publish(self, msg: OutMessage, qos: int, retain: bool, pid: int, dup: bool = False) -> None:
        self.sent.append((msg.topic, qos, pid))

    def send_pubrel(self, pid: int) -> None:
        raise AssertionError("no QoS 2 here")


def test_a_new_session_shares_the_empty_collections() -> None:
    s = Session("dev-1")
    assert not hasattr(s, "__dict__")
    for value in (s.subs, s.sub_ids, s.inflight, s.offsets, s.qos2_in, s.redeliver,
                  s.catchup_pos, s.gaps):
        assert value is EMPTY_DICT
    assert s.queue is NO_QUEUE and s.held is NO_HELD
    with pytest.raises(TypeError):
        NO_HELD.append(None)
    with pytest.raises(TypeError):
        s.subs["a"] = None  # type: ignore[index]


def test_the_first_write_makes_the_sessions_own_collection() -> None:
    s, other = Session("dev-1"), Session("dev-2")
    s.own_subs()["ota"] = None  # type: ignore[assignment]
    s.own_offsets()[("commands", 0)] = 5
    assert s.subs == {"ota": None} and s.offsets == {("commands", 0): 5}
    assert other.subs is EMPTY_DICT and other.offsets is EMPTY_DICT
    # a QoS 1 delivery takes an in-flight map of its own; the PUBACK frees the slot
    out = _Outlet()
    s.conn = out
    assert s.deliver((OutMessage("ota", b"x"), 1, False))
    assert out.sent == [("ota", 1, 1)] and list(s.inflight) == [1]
    assert other.inflight is EMPTY_DICT
    assert s.on_puback(1) and not s.inflight
    assert not other.on_puback(1)
    # held back during a catch-up: a list of its own, then queued and sent
    s.holding = True
    s.enqueue(OutMessage("ota", b"y"), 0)
    assert len(s.held) == 1 and NO_HELD == []


def test_the_reader_keeps_no_buffer_between_packets() -> None:
    reader = PacketReader()
    data = encode(Connect("dev-1", 4, True, 60, None, None, None, {}), 4) + encode(Pingreq(), 4)
    assert len(reader.feed(data)) == 2
    assert reader.buffered == 0 and reader._buf is None  # noqa: SLF001 - the point of the test
    assert reader.feed(data[:5]) == [] and reader.buffered == 5
    packets = reader.feed(data[5:])
    assert [type(p) for p in packets] == [Connect, Pingreq]
    assert reader._buf is None  # noqa: SLF001


def test_an_idle_bridge_has_not_imported_what_it_does_not_use() -> None:
    """aiohttp (WebSocket listener, admin API), and importlib.metadata, which only the
    crc32c package's __init__ wanted (kafkaproto.crc loads its extension alone)."""
    code = ("import sys, mqtt_bridge.cli, mqtt_bridge.bridge; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'crc32c') "
            "or m in ('mqtt_bridge.websocket', 'mqtt_bridge.admin', 'prometheus_client', "
            "'importlib.metadata')))")
    proc = subprocess.run([sys.executable, "-c", code], env=python_path_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
