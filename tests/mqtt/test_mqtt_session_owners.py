"""Which bridge holds a session, decided from session-topic records alone (no sockets)."""

from __future__ import annotations

from mqtt_bridge.session_owners import Marker, SessionOwners, Verdict


def claim(origin: str, nonce: str) -> Marker:
    return Marker(origin=origin, holder=origin, claim=nonce)


def test_markers_round_trip_through_record_headers() -> None:
    m = Marker(origin="a", holder="b", release="n1")
    assert Marker.of(m.headers()) == m
    assert Marker.of([("other", b"x"), ("mqtt.bridge", None)]) == Marker()


def test_a_claim_by_another_bridge_takes_the_session_from_its_holder() -> None:
    a = SessionOwners("a")
    assert a.claimed("d1", 10)
    assert a.holder("d1") == "a"
    assert a.observe("d1", claim("b", "n"), 11) is Verdict.TAKEN
    assert a.holder("d1") == "b" and a.held_elsewhere("d1")


def test_the_newest_claim_wins_whatever_order_the_bridges_learn_of_them() -> None:
    a, b = SessionOwners("a"), SessionOwners("b")
    # b's claim lands at 21 after a's at 20; b reads a's claim before its own ack returns
    assert b.observe("d1", claim("a", "na"), 20) is Verdict.TAKEN
    assert b.claimed("d1", 21)
    assert a.claimed("d1", 20)
    assert a.observe("d1", claim("b", "nb"), 21) is Verdict.TAKEN
    assert a.holder("d1") == b.holder("d1") == "b"
    # a claim acknowledged after a newer one was seen has lost
    c = SessionOwners("c")
    assert c.observe("d1", claim("b", "nb"), 21) is Verdict.TAKEN
    assert not c.claimed("d1", 20)
    assert c.holder("d1") == "b"


def test_late_writes_of_a_former_holder_are_ignored_but_its_release_applies() -> None:
    b = SessionOwners("b")
    assert b.claimed("d1", 30)
    assert b.observe("d1", Marker(origin="a", holder="a"), 31) is Verdict.IGNORE  # a's late save
    assert b.observe("d1", Marker(origin="a", holder="b", release="n"), 32) is Verdict.APPLY
    assert b.holder("d1") == "b"


def test_own_records_and_replays_are_ignored_and_releases_to_nobody_free_the_session() -> None:
    a = SessionOwners("a")
    assert a.observe("d1", Marker(origin="a", holder="a"), 5) is Verdict.IGNORE
    assert a.observe("d1", Marker(origin="x", holder="x"), 6) is Verdict.APPLY
    assert a.observe("d1", Marker(origin="x", holder="x"), 6) is Verdict.IGNORE  # read twice
    assert a.held_elsewhere("d1")
    assert a.observe("d1", Marker(origin="x", release=""), 7) is Verdict.APPLY  # x shut down
    assert a.holder("d1") is None and not a.held_elsewhere("d1")
    assert a.claimed("d1", 8)
    a.released("d1", None)
    assert a.holder("d1") is None


def test_a_won_claim_is_lost_again_to_a_newer_one_seen_before_the_connect_finishes() -> None:
    """b's claim (11) was acknowledged, then c's (12) arrives while b still waits for the
    old holder's release: b no longer holds the session and must not accept the client."""
    b = SessionOwners("b")
    assert b.observe("d1", claim("a", "na"), 10) is Verdict.TAKEN
    assert b.claimed("d1", 11)
    assert b.holder("d1") == "b"
    assert b.observe("d1", claim("c", "nc"), 12) is Verdict.TAKEN
    assert b.holder("d1") == "c"


def test_a_release_to_a_claim_that_lost_does_not_make_its_bridge_the_holder() -> None:
    """Three bridges claim at once: c held the session and releases it to b (claim 11)
    after a's claim (12) won. b must not take that release as the session handed to it,
    and nobody else may either; a's own release target is honoured."""
    for me in ("a", "b", "d"):
        o = SessionOwners(me)
        o.observe("d1", Marker(origin="c", holder="c"), 9)  # c's save: c holds
        if me == "b":
            assert o.claimed("d1", 11)
        else:
            assert o.observe("d1", claim("b", "nb"), 11) is Verdict.TAKEN
        if me == "a":
            assert o.claimed("d1", 12)
        else:
            assert o.observe("d1", claim("a", "na"), 12) is Verdict.TAKEN
        assert o.observe("d1", Marker(origin="c", holder="b", release="nb"), 13) is Verdict.IGNORE
        assert o.holder("d1") == "a"
        assert o.observe("d1", Marker(origin="c", holder="c"), 14) is Verdict.IGNORE  # late save
        b_hands_over = o.observe("d1", Marker(origin="b", holder="a", release="na"), 15)
        assert b_hands_over is (Verdict.IGNORE if me == "b" else Verdict.APPLY)
        assert o.holder("d1") == "a"
