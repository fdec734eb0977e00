"""ServerFraming without sockets: frames from bytes in any split, size limits before the
body, responses completed in any order leaving in request order, acks=0 without a slot."""

from __future__ import annotations

import random
import struct

import pytest

from logserver.framing import ServerFraming


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _feed(framing: ServerFraming, data: bytes, rng: random.Random) -> list[bytes]:
    """Writes ``data`` the way a socket would: into get_buffer(), in random pieces."""
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        buf = framing.get_buffer()
        n = min(len(buf), rng.randint(1, 5000), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        frames += [bytes(f) for f in framing.buffer_updated(n)]
    return frames


@pytest.mark.parametrize("seed", range(5))
def test_frames_survive_any_split(seed: int) -> None:
    rng = random.Random(seed)
    bodies = [rng.randbytes(rng.choice([8, 9, 100, 4000, 40_000, 200_000])) for _ in range(60)]
    framing: ServerFraming[bytes] = ServerFraming(1 << 20, staging_bytes=32 * 1024)
    assert _feed(framing, b"".join(_frame(b) for b in bodies), rng) == bodies
    assert framing.failed is None


def test_frames_are_copies_that_outlive_the_staging_buffer() -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64)
    rng = random.Random(1)
    first = _feed(framing, _frame(b"a" * 10), rng)
    second = _feed(framing, _frame(b"b" * 10), rng)
    assert first == [b"a" * 10] and second == [b"b" * 10]


@pytest.mark.parametrize("size", [-1, 0, 7, 1001, 2**31 - 1])
def test_size_out_of_range_fails_before_the_body(size: int) -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64)
    good = _frame(b"x" * 20)
    buf = framing.get_buffer()
    data = good + struct.pack(">i", size)  # no body follows: refused on the size alone
    buf[:len(data)] = data
    assert [bytes(f) for f in framing.buffer_updated(len(data))] == [b"x" * 20]
    assert framing.failed is not None and "socket.request.max.bytes" in framing.failed
    buf = framing.get_buffer()
    buf[:4] = _frame(b"")[:4]
    assert framing.buffer_updated(4) == []  # nothing more is parsed after a failure


def test_a_frame_at_the_limit_is_accepted() -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64)
    assert _feed(framing, _frame(b"z" * 1000), random.Random(2)) == [b"z" * 1000]


def test_responses_leave_in_request_order_whatever_order_they_complete() -> None:
    rng = random.Random(3)
    framing: ServerFraming[bytes] = ServerFraming(1000)
    expected: list[bytes] = []
    later = []
    for i in range(200):
        kind = rng.choice(["now", "later", "none-later", "acks0"])
        if kind == "now":
            framing.respond([b"%d;" % i])
            expected.append(b"%d;" % i)
        elif kind == "later":
            later.append((framing.reserve(), [b"%d-a;" % i, b"%d-b;" % i]))
            expected += [b"%d-a;" % i, b"%d-b;" % i]
        elif kind == "none-later":
            later.append((framing.reserve(), None))
        # acks0: no slot, no response
    out: list[bytes] = []
    rng.shuffle(later)
    for slot, chunks in later:
        framing.complete(slot, chunks)
        out += framing.take_output()
        assert out == expected[:len(out)]  # a prefix, never a jump ahead
    out += framing.take_output()
    assert out == expected
    assert framing.waiting == 0 and not framing.has_output


def test_a_ready_response_waits_behind_one_that_is_not() -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000)
    slow = framing.reserve()
    framing.respond([b"second"])
    assert framing.take_output() == [] and framing.waiting == 2
    framing.complete(slow, [b"first"])
    assert framing.take_output() == [b"first", b"second"]


def test_close_reports_unfinished_slots_and_drops_output() -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000)
    framing.respond([b"sent"])
    pending = framing.reserve()
    framing.respond([b"blocked"])
    assert framing.close() == [pending]
    assert framing.take_output() == [] and framing.waiting == 0


def test_a_big_frame_buffer_grows_with_the_bytes_that_arrive() -> None:
    """A 100 MB size prefix followed by 6 bytes costs the staging buffer and 64 KiB, not
    100 MB; as the body arrives the buffer doubles, never past the announced size."""
    size = 100_000_000
    framing: ServerFraming[bytes] = ServerFraming(size, staging_bytes=1024)
    buf = framing.get_buffer()
    data = struct.pack(">i", size) + b"abcdef"
    buf[:len(data)] = data
    assert framing.buffer_updated(len(data)) == []
    assert framing.buffered_bytes <= 1024 + 64 * 1024
    body = bytes(range(256)) * (300_000 // 256)
    frame = _frame(body)
    framing = ServerFraming(len(body), staging_bytes=1024)
    sizes = []
    pos = 0
    out: list[bytes] = []
    while pos < len(frame):
        buf = framing.get_buffer()
        n = min(len(buf), 10_000, len(frame) - pos)
        buf[:n] = frame[pos:pos + n]
        pos += n
        sizes.append(framing.buffered_bytes - 1024)
        assert sizes[-1] <= max(2 * pos, 64 * 1024), (pos, sizes[-1])
        out += [bytes(f) for f in framing.buffer_updated(n)]
    assert out == [body]
    assert max(sizes) <= len(body)


def test_request_budget_blocks_new_frames_and_wakes_in_order() -> None:
    """queued.max.request.bytes without sockets: a frame's size is reserved from its size
    prefix; with nothing left the framing is blocked until a release wakes it."""
    from logserver.request_budget import RequestBudget

    budget = RequestBudget(100)
    a: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64, budget=budget)
    b: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64, budget=budget)
    rng = random.Random(4)
    # a: 150 bytes announced with budget left: granted (Kafka's pool is not strict)
    big = _frame(b"A" * 150)
    buf = a.get_buffer()
    buf[:10] = big[:10]
    assert a.buffer_updated(10) == [] and budget.used == 150 and not a.blocked
    # b: no budget left: blocked, nothing parsed, even once its whole frame is in
    buf = b.get_buffer()
    small = _frame(b"b" * 20)
    buf[:len(small)] = small
    assert b.buffer_updated(len(small)) == [] and b.blocked and budget.refused == 1
    woken: list[str] = []
    budget.wait("b", lambda: woken.append("b"))
    assert _feed(a, big[10:], rng) == [b"A" * 150]
    assert woken == []  # the frame is read, not yet answered: still reserved
    budget.release(150)
    assert woken == ["b"] and budget.used == 0
    assert [bytes(f) for f in b.unblock()] == [b"b" * 20] and budget.used == 20
    budget.release(20)
    # a connection that closes half-way through a frame gives its reservation back
    c: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64, budget=budget)
    buf = c.get_buffer()
    buf[:10] = big[:10]
    c.buffer_updated(10)
    assert budget.used == 150
    c.close()
    assert budget.used == 0


def test_a_partial_small_frame_is_reserved_once() -> None:
    from logserver.request_budget import RequestBudget

    budget = RequestBudget(1000)
    framing: ServerFraming[bytes] = ServerFraming(1000, staging_bytes=64, budget=budget)
    frame = _frame(b"x" * 30)
    for i in range(len(frame)):  # one byte at a time: the prefix is parsed many times
        buf = framing.get_buffer()
        buf[:1] = frame[i:i + 1]
        out = framing.buffer_updated(1)
    assert [bytes(f) for f in out] == [b"x" * 30] and budget.used == 30


def test_ready_bytes_count_what_take_output_returns() -> None:
    framing: ServerFraming[bytes] = ServerFraming(1000)
    slot = framing.reserve()
    framing.respond([b"12345"])
    assert framing.ready_bytes == 0
    framing.complete(slot, [b"abc"])
    assert framing.ready_bytes == 8
    framing.take_output()
    assert framing.ready_bytes == 0


def test_an_idle_connection_holds_no_input_buffer() -> None:
    """Issue 27: the staging buffer exists only while bytes are buffered. A new framing,
    and one whose requests were all taken, hold none; a half-read frame keeps it."""
    framing: ServerFraming[bytes] = ServerFraming(1 << 20, staging_bytes=32 * 1024)
    assert framing.buffered_bytes == 0
    request = _frame(b"apiversions!")
    buf = framing.get_buffer()
    assert len(buf) == 32 * 1024
    buf[:len(request) - 3] = request[:-3]
    assert framing.buffer_updated(len(request) - 3) == []
    assert framing.buffered_bytes == 32 * 1024  # a partial frame waits in it
    buf = framing.get_buffer()
    buf[:3] = request[-3:]
    assert [bytes(f) for f in framing.buffer_updated(3)] == [b"apiversions!"]
    assert framing.buffered_bytes == 0
    # the next request allocates afresh and parses as before
    assert _feed(framing, request * 2, random.Random(1)) == [b"apiversions!"] * 2
    assert framing.buffered_bytes == 0


def test_a_staging_buffer_given_up_is_reused_by_the_next_read() -> None:
    """A busy connection takes a spare buffer rather than allocating (and zeroing) 32 KiB
    for every read; frames are copies, so the reuse never shows in them."""
    first: ServerFraming[bytes] = ServerFraming(1 << 20, staging_bytes=12_345)
    buf = first.get_buffer()
    given_up = buf.obj
    request = _frame(b"first request")
    buf[:len(request)] = request
    frames = first.buffer_updated(len(request))
    del buf
    second: ServerFraming[bytes] = ServerFraming(1 << 20, staging_bytes=12_345)
    reused = second.get_buffer()
    assert reused.obj is given_up
    reused[:4] = b"\xff" * 4  # the first framing's frame is untouched
    assert [bytes(f) for f in frames] == [b"first request"]
