"""Sample values generated from the declarations, for tests.

The server's and bridge's tests build fully populated messages of any API and version
from the declarations themselves, instead of hand-written fixtures that drift from them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from kafkaproto.codegen import Message, Struct, field_default
from kafkaproto.schema import Field

__all__ = ["sample", "to_plain"]


def sample(
    cls: type[Message],
    version: int,
    *,
    nulls: bool = False,
    array_len: int = 2,
    seed: int = 0,
) -> Message:
    """A ``cls`` instance with a non-default value in every field present in ``version``.

    ``nulls=True`` sets every field that is nullable in ``version`` to null
    instead. Fields absent from ``version`` keep their defaults, so an
    encode/decode round trip must reproduce the instance exactly.
    """
    counter = itertools.count(seed * 1000 + 1)
    obj = _fill(cls, version, nulls, array_len, counter)
    assert isinstance(obj, Message)
    return obj


def _fill(
    cls: type[Struct], version: int, nulls: bool, array_len: int, counter: Iterator[int]
) -> Struct:
    kwargs: dict[str, Any] = {}
    for f in cls._fields:
        if version in f.versions:
            kwargs[f.attr] = _value(f, cls, version, nulls, array_len, counter)
    return cls(**kwargs)


def _value(
    f: Field,
    owner: type[Struct],
    version: int,
    nulls: bool,
    array_len: int,
    counter: Iterator[int],
) -> Any:
    if nulls and version in f.nullable:
        return None
    if f.is_array:
        if f.is_struct:
            sub = owner._children[f.attr]
            return [_fill(sub, version, nulls, array_len, counter) for _ in range(array_len)]
        return [_scalar(f.elem_type, next(counter), None) for _ in range(array_len + 1)]
    if f.is_struct:
        return _fill(owner._children[f.attr], version, nulls, array_len, counter)
    default = field_default(f, owner._children)[0]
    return _scalar(f.type, next(counter), default)


_INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(t: str, n: int, default: Any) -> Any:
    if t == "bool":
        return not default if isinstance(default, bool) else True
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        # Spread values over the type's range, both signs, away from the default.
        v = (n * 7919 * (hi // 50_000 + 1)) % (hi - lo + 1) + lo
        if v == default:
            v = v + 1 if v < hi else v - 1
        return v
    if t == "float64":
        return n + 0.25
    if t == "uuid":
        return bytes((n * 31 + i) % 256 for i in range(16))
    if t == "string":
        if n % 5 == 0:
            return f"long-{n}-" + "x" * 200  # length prefix > 127 exercises multi-byte varints
        return f"s{n}-é✓"
    if t == "bytes":
        return bytes(i % 256 for i in range(n % 7 + 1))
    if t == "records":
        return bytes((n + i) % 256 for i in range(130 + n % 5))
    raise AssertionError(t)


def to_plain(obj: Any, version: int) -> Any:
    """Nested dicts of only the fields present in ``version`` (memoryviews as bytes)."""
    if isinstance(obj, Struct):
        return {
            f.attr: to_plain(getattr(obj, f.attr), version)
            for f in obj._fields
            if version in f.versions
        }
    if isinstance(obj, list):
        return [to_plain(v, version) for v in obj]
    if isinstance(obj, memoryview | bytearray):
        return bytes(obj)
    return obj
