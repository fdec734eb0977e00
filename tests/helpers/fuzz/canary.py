"""A harness with a planted bug, so the test suite proves a crash is caught and reported.

Crashes (IndexError, as a decoder bug would) on inputs starting with ``b"FUZZ"``; the seed
is one byte short, so libFuzzer has to find the crash itself (its comparison hooks make
that quick).
"""

from __future__ import annotations

from collections.abc import Iterator

PACKAGES: tuple[str, ...] = ()  # common.main instruments the harness itself


def seeds() -> Iterator[bytes]:
    yield b"FUZ"


def test_one_input(data: bytes) -> None:
    if data[:4] == b"FUZZ":
        raise IndexError("planted bug")


if __name__ == "__main__":
    from helpers.fuzz.common import main

    main(seeds, test_one_input, PACKAGES)
