"""The declaration DSL: Kafka messages described once, as data.

A message is a tuple of :class:`Field` objects built with :func:`field` (short
alias ``F``). Each field carries the same facts as Kafka's JSON message
definitions: its Kafka type string (``"int32"``, ``"string"``, ``"[]int32"``,
``"[]SomeStruct"``, ``"SomeStruct"``), the versions it exists in, the versions
in which it is nullable, and, for tagged fields, its tag and tagged versions.
Struct-typed fields list their children inline, or name a common struct
declared once with :func:`struct`.

Nothing here encodes bytes; :mod:`kafkaproto.codegen` turns declarations into
classes and per-version codecs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MISSING",
    "NO_VERSIONS",
    "F",
    "Field",
    "StructDecl",
    "VersionRange",
    "field",
    "snake_case",
    "struct",
]

#: Highest version number an open-ended range ("3+") reaches.
MAX_VERSION: Final = 0x7FFF


class _Missing:
    """Sentinel type for "no value given" (distinct from ``None`` = null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive version range; empty when ``lo > hi``."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @classmethod
    def parse(cls, spec: str | None) -> VersionRange:
        """Parse Kafka's range syntax: ``"3+"``, ``"0-12"``, ``"7"``, ``"none"``."""
        if spec is None:
            return NO_VERSIONS
        spec = spec.strip()
        if spec in ("", "none"):
            return NO_VERSIONS
        if spec.endswith("+"):
            return cls(int(spec[:-1]), MAX_VERSION)
        if "-" in spec:
            lo, hi = spec.split("-", 1)
            return cls(int(lo), int(hi))
        v = int(spec)
        return cls(v, v)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NO_VERSIONS: Final = VersionRange(0, -1)

#: struct-module format characters of the fixed-width Kafka types.
FIXED_FORMATS: Final[dict[str, str]] = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}
#: Length-prefixed Kafka types.
VARIABLE_TYPES: Final = frozenset({"string", "bytes", "records"})
PRIMITIVE_TYPES: Final = frozenset(FIXED_FORMATS) | VARIABLE_TYPES

ZERO_UUID: Final = bytes(16)

_SNAKE_RE: Final = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    """Kafka field name to Python attribute: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return _SNAKE_RE.sub("_", name).lower()


@dataclass(frozen=True, slots=True, eq=False)
class Field:
    """One declared field; see :func:`field` for the meaning of each part."""

    name: str
    attr: str
    type: str
    versions: VersionRange
    nullable: VersionRange
    tagged: VersionRange
    tag: int | None
    default: Any
    fields: tuple[Field, ...] | None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        """The element type of an array, or the type itself."""
        return self.type[2:] if self.type.startswith("[]") else self.type

    @property
    def is_struct(self) -> bool:
        """True for struct fields and arrays of structs."""
        return self.elem_type not in PRIMITIVE_TYPES

    def in_version(self, version: int) -> bool:
        return version in self.versions

    def __repr__(self) -> str:
        extra = ""
        if not self.nullable.empty:
            extra += f", nullable={str(self.nullable)!r}"
        if self.tag is not None:
            extra += f", tag={self.tag}"
        return f"F({self.name!r}, {self.type!r}, {str(self.versions)!r}{extra})"


@dataclass(frozen=True, slots=True, eq=False)
class StructDecl:
    """A named struct declared once and referenced by type name (Kafka's commonStructs)."""

    name: str
    fields: tuple[Field, ...]


def field(
    name: str,
    type: str,
    versions: str,
    *fields: Field,
    nullable: str | None = None,
    default: Any = MISSING,
    tag: int | None = None,
    tagged: str | None = None,
) -> Field:
    """Declare a field.

    ``name`` is Kafka's name (attribute is its snake_case), ``type`` Kafka's
    type string, ``versions``/``nullable``/``tagged`` Kafka range strings.
    ``default`` is the Python default (``None`` = null); when omitted the
    Kafka type default is used (0, False, "", b"", zero UUID, empty list,
    a default struct, or null for records). Struct types list their child
    fields positionally unless they name a common struct.
    """
    vr = VersionRange.parse(versions)
    nr = VersionRange.parse(nullable)
    if tag is not None and tagged is None:
        tagged = versions
    tr = VersionRange.parse(tagged)
    elem = type[2:] if type.startswith("[]") else type
    if elem in PRIMITIVE_TYPES:
        if fields:
            raise ValueError(f"field {name}: primitive type {type} cannot have child fields")
        children: tuple[Field, ...] | None = None
    else:
        if not elem[:1].isupper():
            raise ValueError(f"field {name}: unknown type {type!r}")
        children = tuple(fields) if fields else None
    if tag is None and not tr.empty:
        raise ValueError(f"field {name}: tagged versions without a tag")
    if default is None and nr.empty:
        raise ValueError(f"field {name}: null default on a field that is never nullable")
    if type.startswith("[]") and elem == "records":
        raise ValueError(f"field {name}: arrays of records are not a Kafka type")
    return Field(
        name=name,
        attr=snake_case(name),
        type=type,
        versions=vr,
        nullable=nr,
        tagged=tr,
        tag=tag,
        default=default,
        fields=children,
    )


def struct(name: str, *fields: Field) -> StructDecl:
    """Declare a common struct, referenced from fields by its type name."""
    return StructDecl(name, tuple(fields))


F = field
