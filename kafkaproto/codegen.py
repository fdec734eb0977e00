"""Classes and codecs derived from the declarations in :mod:`kafkaproto.schema`.

Why generate source: a generic interpreter walking field lists costs a few
function calls and dict lookups per field per message, which dominates the
produce/fetch path. Instead, for each (message, version, direction) we emit one
straight-line Python function with nested structs and arrays inlined,
consecutive fixed-width fields merged into one precompiled ``struct.Struct``
call, and the one-byte varint case inlined. The source is compiled with
``exec`` the first time that version is used and cached on the class.

Message classes themselves (``__slots__``, keyword ``__init__`` with Kafka
defaults, ``__eq__``, ``__repr__``) are generated eagerly at import, because
handlers import them by name.
"""

from __future__ import annotations

import keyword
import linecache
import logging
import struct as _struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Self

from .code_cache import compiled
from .errors import DecodeError, EncodeError, UnsupportedVersionError
from .schema import (
    FIXED_FORMATS,
    MISSING,
    ZERO_UUID,
    Field,
    StructDecl,
)
from .wire import FileRegion, encode_uvarint, read_uvarint_slow, skip_tagged_fields

__all__ = ["Message", "Struct", "build_message"]

logger = logging.getLogger(__name__)

EncodeFn = Callable[[Any, bytearray, list[Any]], bytearray]
DecodeFn = Callable[[memoryview, int], tuple[Any, int]]

#: Exceptions a generated decoder may raise on malformed input (mapped to DecodeError).
DECODE_FAILURES: tuple[type[BaseException], ...] = (
    _struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
    OverflowError,
)
#: Exceptions a generated encoder may raise on bad field values (mapped to EncodeError).
ENCODE_FAILURES: tuple[type[BaseException], ...] = (
    _struct.error,
    AttributeError,
    TypeError,
    UnicodeEncodeError,
    ValueError,
    OverflowError,
)


def _plain(value: Any) -> Any:
    """Nested plain-Python form of a field value (for tests, logs, JSON)."""
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


class Struct:
    """Base of every generated struct class; the generated subclass adds slots and methods."""

    __slots__ = ()
    _fields: ClassVar[tuple[Field, ...]] = ()
    #: attr -> generated class, for struct-typed fields.
    _children: ClassVar[dict[str, type[Struct]]] = {}

    def to_dict(self) -> dict[str, Any]:
        """Nested dicts/lists/bytes, memoryviews copied; for tests and debugging."""
        return {f.attr: _plain(getattr(self, f.attr)) for f in self._fields}


class Message(Struct):
    """Base of top-level request/response classes: owns the per-version codec caches."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    IS_REQUEST: ClassVar[bool]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_MIN: ClassVar[int | None]
    _encoders: ClassVar[dict[int, EncodeFn]]
    _decoders: ClassVar[dict[int, DecodeFn]]
    _sources: ClassVar[dict[tuple[int, str], str]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN

    @classmethod
    def _check_version(cls, version: int) -> None:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(cls.API_KEY, version)

    @classmethod
    def encoder(cls, version: int) -> EncodeFn:
        """``fn(obj, out, chunks) -> out``: append the body to ``out`` (compiled on first use).

        A ``FileRegion`` value moves ``out`` onto ``chunks``, appends the
        region and continues in a fresh bytearray, which is returned.
        """
        fn = cls._encoders.get(version)
        if fn is None:
            cls._check_version(version)
            fn = _compile(cls, version, "encode")
            cls._encoders[version] = fn
        return fn

    @classmethod
    def decoder(cls, version: int) -> DecodeFn:
        """``fn(buf, pos) -> (obj, end)`` over a byte memoryview (compiled on first use)."""
        fn = cls._decoders.get(version)
        if fn is None:
            cls._check_version(version)
            fn = _compile(cls, version, "decode")
            cls._decoders[version] = fn
        return fn

    @classmethod
    def codec_source(cls, version: int, kind: str) -> str:
        """The generated Python source of ``kind`` ("encode"/"decode") for ``version``."""
        (cls.encoder if kind == "encode" else cls.decoder)(version)
        return cls._sources[(version, kind)]

    def encode(self, version: int) -> bytes:
        """The body alone (no header, no size prefix); FileRegion values are not allowed here."""
        chunks: list[Any] = []
        try:
            out = type(self).encoder(version)(self, bytearray(), chunks)
        except ENCODE_FAILURES as exc:
            raise EncodeError(f"{type(self).__name__} v{version}: {exc}") from exc
        if chunks:
            raise EncodeError("FileRegion values need encode_response(), not encode()")
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Self:
        """Decode a body (no header); trailing bytes are ignored."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        try:
            obj, _end = cls.decoder(version)(buf, 0)
        except DecodeError:
            raise
        except DECODE_FAILURES as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from exc
        return obj


# ---------------------------------------------------------------------------
# class generation


def field_default(f: Field, children: dict[str, type[Struct]]) -> tuple[Any, bool]:
    """(default value or factory, is_factory) for a field, following Kafka's rules."""
    if f.is_array:
        if f.default is None:
            return None, False
        if f.default is not MISSING and f.default != []:
            raise ValueError(f"field {f.name}: arrays only default to [] or null")
        return list, True
    if f.is_struct:
        if f.default is None:
            return None, False
        return children[f.attr], True
    if f.default is not MISSING:
        if f.type == "uuid" and f.default is not None and len(f.default) != 16:
            raise ValueError(f"field {f.name}: uuid default must be 16 bytes")
        return f.default, False
    t = f.type
    if t == "bool":
        return False, False
    if t == "float64":
        return 0.0, False
    if t in FIXED_FORMATS and t != "uuid":
        return 0, False
    if t == "uuid":
        return ZERO_UUID, False
    if t == "string":
        return "", False
    if t == "bytes":
        return b"", False
    if t == "records":
        return None, False
    raise AssertionError(t)


def _make_class(
    name: str,
    fields: tuple[Field, ...],
    children: dict[str, type[Struct]],
    base: type[Struct],
    qualname: str,
    module: str,
) -> type[Struct]:
    """Generate one slotted class with ``__init__``/``__eq__``/``__repr__``."""
    ns: dict[str, Any] = {"_M": MISSING}
    params: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        a = f.attr
        if keyword.iskeyword(a) or a.startswith("_"):
            raise ValueError(f"{name}: field name {a!r} is not usable as an attribute")
        value, is_factory = field_default(f, children)
        if is_factory:
            ns[f"_f{i}"] = value
            params.append(f"{a}=_M")
            body.append(f"    self.{a} = _f{i}() if {a} is _M else {a}")
        else:
            ns[f"_d{i}"] = value
            params.append(f"{a}=_d{i}")
            body.append(f"    self.{a} = {a}")
    lines = []
    if params:
        lines.append(f"def __init__(self, *, {', '.join(params)}):")
        lines.extend(body)
    else:
        lines.append("def __init__(self):")
        lines.append("    pass")
    lines.append("def __eq__(self, other):")
    lines.append("    if other.__class__ is not self.__class__:")
    lines.append("        return NotImplemented")
    if fields:
        cmp = " and ".join(f"self.{f.attr} == other.{f.attr}" for f in fields)
        lines.append(f"    return {cmp}")
    else:
        lines.append("    return True")
    lines.append("def __repr__(self):")
    if fields:
        parts = ", ".join(f"{f.attr}={{self.{f.attr}!r}}" for f in fields)
        lines.append(f'    return f"{name}({parts})"')
    else:
        lines.append(f'    return "{name}()"')
    src = "\n".join(lines) + "\n"
    filename = f"<kafkaproto class {name}>"
    exec(compiled(src, filename), ns)  # noqa: S102 - generated from declarations
    cls_ns: dict[str, Any] = {
        "__slots__": tuple(f.attr for f in fields),
        "__init__": ns["__init__"],
        "__eq__": ns["__eq__"],
        "__repr__": ns["__repr__"],
        "__doc__": f"Kafka struct {name} (generated from its declaration).",
        "_fields": fields,
        "_children": dict(children),
        "__qualname__": qualname,
        "__module__": module,
    }
    return type(name, (base,), cls_ns)


def build_message(
    name: str,
    fields: Sequence[Field],
    *,
    api_key: int,
    api_name: str,
    is_request: bool,
    min_version: int,
    max_version: int,
    flexible_min: int | None,
    common: Sequence[StructDecl] = (),
    module: str = "kafkaproto.messages",
) -> type[Message]:
    """Build the top-level message class and all nested struct classes.

    Nested classes are attached to the message class under their Kafka struct
    names, however deep they are declared (qualname ``Message.Struct``, so
    instances pickle).
    """
    commons = {c.name: c.fields for c in common}
    built: dict[str, tuple[tuple[Field, ...], type[Struct]]] = {}

    def make(struct_name: str, struct_fields: tuple[Field, ...]) -> type[Struct]:
        seen = built.get(struct_name)
        if seen is not None:
            if seen[0] is not struct_fields:
                raise ValueError(f"{name}: struct {struct_name} declared twice differently")
            return seen[1]
        children: dict[str, type[Struct]] = {}
        for f in struct_fields:
            if f.is_struct:
                sub = f.fields if f.fields is not None else commons.get(f.elem_type)
                if sub is None:
                    raise ValueError(f"{name}: struct type {f.elem_type} has no fields")
                children[f.attr] = make(f.elem_type, sub)
        _validate(name, struct_fields, flexible_min)
        cls = _make_class(
            struct_name, struct_fields, children, Struct, f"{name}.{struct_name}", module
        )
        built[struct_name] = (struct_fields, cls)
        return cls

    top_fields = tuple(fields)
    children: dict[str, type[Struct]] = {}
    for f in top_fields:
        if f.is_struct:
            sub = f.fields if f.fields is not None else commons.get(f.elem_type)
            if sub is None:
                raise ValueError(f"{name}: struct type {f.elem_type} has no fields")
            children[f.attr] = make(f.elem_type, sub)
    _validate(name, top_fields, flexible_min)
    cls = _make_class(name, top_fields, children, Message, name, module)
    assert issubclass(cls, Message)
    cls.API_KEY = api_key
    cls.API_NAME = api_name
    cls.IS_REQUEST = is_request
    cls.MIN_VERSION = min_version
    cls.MAX_VERSION = max_version
    cls.FLEXIBLE_MIN = flexible_min
    cls._encoders = {}
    cls._decoders = {}
    cls._sources = {}
    for struct_name, (_f, sub_cls) in built.items():
        if struct_name in cls.__dict__:
            raise ValueError(f"{name}: struct name {struct_name} clashes with an attribute")
        setattr(cls, struct_name, sub_cls)
    return cls


def _validate(owner: str, fields: tuple[Field, ...], flexible_min: int | None) -> None:
    attrs = [f.attr for f in fields]
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"{owner}: duplicate field names {attrs}")
    tags = [f.tag for f in fields if f.tag is not None]
    if len(set(tags)) != len(tags):
        raise ValueError(f"{owner}: duplicate tags {tags}")
    for f in fields:
        if f.tag is not None:
            if flexible_min is None or f.tagged.lo < flexible_min:
                raise ValueError(f"{owner}.{f.name}: tagged outside flexible versions")
            if f.type == "records":
                raise ValueError(f"{owner}.{f.name}: records cannot be tagged")


# ---------------------------------------------------------------------------
# codec generation


class _Gen:
    """Accumulates generated source lines plus the constants they reference."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flex = flexible
        self.lines: list[str] = []
        self.prologue: dict[str, str] = {}
        self.ns: dict[str, Any] = {
            "_new": object.__new__,
            "_FR": FileRegion,
            "_uv": encode_uvarint,
            "_uvs": read_uvarint_slow,
            "_skip": skip_tagged_fields,
            "_DE": DecodeError,
            "_unpack_from": _struct.unpack_from,
            "_pack": _struct.pack,
        }
        self._n = 0
        self._consts: dict[int, str] = {}

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

    def const(self, value: Any) -> str:
        """Name for an arbitrary constant object placed in the function's globals."""
        key = id(value)
        name = self._consts.get(key)
        if name is None:
            name = self.var("_c")
            self._consts[key] = name
            self.ns[name] = value
        return name

    def literal(self, value: Any) -> str:
        """Source text for a default value: a literal when safe, else a constant."""
        if value is None or isinstance(value, bool | int | float | str | bytes):
            return repr(value)
        return self.const(value)

    def _struct_obj(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "Q_")
        if name not in self.ns:
            self.ns[name] = _struct.Struct(">" + fmt)
        return name

    def packer(self, fmt: str) -> str:
        s = self._struct_obj(fmt)
        local = "p" + s
        self.prologue[local] = f"{local} = {s}.pack"
        return local

    def unpacker(self, fmt: str) -> tuple[str, int]:
        s = self._struct_obj(fmt)
        local = "u" + s
        self.prologue[local] = f"{local} = {s}.unpack_from"
        return local, _struct.calcsize(">" + fmt)

    # -- helpers shared by both directions ---------------------------------

    def present(self, fields: tuple[Field, ...]) -> Iterator[Field]:
        """Fields written positionally in this version (present and not tagged)."""
        v = self.version
        for f in fields:
            if v in f.versions and not (self.flex and v in f.tagged):
                yield f

    def tagged(self, fields: tuple[Field, ...]) -> list[Field]:
        v = self.version
        if not self.flex:
            return []
        out = [f for f in fields if v in f.versions and v in f.tagged]
        out.sort(key=lambda f: f.tag or 0)
        return out

    def fixed_format(self, f: Field) -> str | None:
        if f.is_array or f.is_struct:
            return None
        return FIXED_FORMATS.get(f.type)

    # -- encoding -----------------------------------------------------------

    def enc_len(self, ind: int, out: str, n: str, wide: bool, big: bool = False) -> None:
        """Length prefix: int16/int32 classic, unsigned varint n+1 when flexible.

        ``big`` (record sets, bytes) also inlines the two-byte varint case.
        """
        if self.flex:
            self.emit(ind, f"if {n} < 127: {out}.append({n} + 1)")
            if big:
                self.emit(
                    ind,
                    f"elif {n} < 16383: "
                    f"{out}.append((({n} + 1) & 127) | 128); {out}.append(({n} + 1) >> 7)",
                )
            self.emit(ind, f"else: {out} += _uv({n} + 1)")
        else:
            self.emit(ind, f"{out} += {self.packer('i' if wide else 'h')}({n})")

    def enc_null(self, ind: int, out: str, wide: bool) -> None:
        if self.flex:
            self.emit(ind, f"{out}.append(0)")
        else:
            marker = b"\xff\xff\xff\xff" if wide else b"\xff\xff"
            self.emit(ind, f"{out} += {marker!r}")

    def enc_struct(self, cls: type[Struct], obj: str, out: str, ind: int, main_out: bool) -> None:
        run: list[tuple[str, str]] = []
        for f in self.present(cls._fields):
            fmt = self.fixed_format(f)
            if fmt is not None:
                run.append((fmt, f"{obj}.{f.attr}"))
                continue
            self.enc_flush(run, out, ind)
            self.enc_value(f, cls, f"{obj}.{f.attr}", out, ind, main_out)
        self.enc_flush(run, out, ind)
        if self.flex:
            self.enc_tags(cls, obj, out, ind)

    def enc_flush(self, run: list[tuple[str, str]], out: str, ind: int) -> None:
        if not run:
            return
        fmt = "".join(r[0] for r in run)
        args = ", ".join(r[1] for r in run)
        self.emit(ind, f"{out} += {self.packer(fmt)}({args})")
        run.clear()

    def enc_value(
        self, f: Field, owner: type[Struct], expr: str, out: str, ind: int, main_out: bool
    ) -> None:
        """Encode field ``f`` of ``owner`` whose value is ``expr`` (non-tagged layout)."""
        nullable = self.version in f.nullable
        if f.is_array:
            a = self.var("a")
            self.emit(ind, f"{a} = {expr}")
            if nullable:
                self.emit(ind, f"if {a} is None:")
                self.enc_null(ind + 1, out, wide=True)
                self.emit(ind, "else:")
                ind += 1
            n = self.var("n")
            self.emit(ind, f"{n} = len({a})")
            self.enc_len(ind, out, n, wide=True)
            elem = f.elem_type
            fmt = FIXED_FORMATS.get(elem)
            if f.is_struct:
                e = self.var("e")
                self.emit(ind, f"for {e} in {a}:")
                self.enc_struct(owner._children[f.attr], e, out, ind + 1, main_out)
            elif fmt is not None and len(fmt) == 1:
                self.emit(ind, f"if {n}: {out} += _pack('>%d{fmt}' % {n}, *{a})")
            else:
                e = self.var("e")
                self.emit(ind, f"for {e} in {a}:")
                self.enc_scalar(elem, e, out, ind + 1, nullable=False, main_out=main_out)
            return
        if f.is_struct:
            s = self.var("s")
            self.emit(ind, f"{s} = {expr}")
            if nullable:
                self.emit(ind, f"if {s} is None:")
                self.emit(ind + 1, f"{out}.append(255)")
                self.emit(ind, "else:")
                ind += 1
                self.emit(ind, f"{out}.append(1)")
            self.enc_struct(owner._children[f.attr], s, out, ind, main_out)
            return
        self.enc_scalar(f.type, expr, out, ind, nullable=nullable, main_out=main_out)

    def enc_scalar(
        self, t: str, expr: str, out: str, ind: int, nullable: bool, main_out: bool
    ) -> None:
        fmt = FIXED_FORMATS.get(t)
        if fmt is not None:
            self.emit(ind, f"{out} += {self.packer(fmt)}({expr})")
            return
        v = self.var("v")
        self.emit(ind, f"{v} = {expr}")
        wide = t != "string"
        if nullable or t == "records":
            self.emit(ind, f"if {v} is None:")
            self.enc_null(ind + 1, out, wide)
            if t == "records":
                self.enc_records_region(v, out, ind, main_out)
            self.emit(ind, "else:")
            ind += 1
        if t == "string":
            b = self.var("b")
            self.emit(ind, f"{b} = {v}.encode()")
            n = self.var("n")
            self.emit(ind, f"{n} = len({b})")
            self.enc_len(ind, out, n, wide=False)
            self.emit(ind, f"{out} += {b}")
        else:
            n = self.var("n")
            self.emit(ind, f"{n} = len({v})")
            self.enc_len(ind, out, n, wide=True, big=True)
            self.emit(ind, f"{out} += {v}")

    def enc_records_region(self, v: str, out: str, ind: int, main_out: bool) -> None:
        """A FileRegion ends the current bytearray chunk and becomes a chunk itself."""
        self.emit(ind, f"elif isinstance({v}, _FR):")
        if not main_out:
            self.emit(ind + 1, "raise TypeError('FileRegion not allowed in a tagged field')")
            return
        n = self.var("n")
        self.emit(ind + 1, f"{n} = {v}.length")
        self.enc_len(ind + 1, out, n, wide=True, big=True)
        self.emit(ind + 1, f"chunks.append({out})")
        self.emit(ind + 1, f"chunks.append({v})")
        self.emit(ind + 1, f"{out} = bytearray()")

    def default_differs(self, f: Field, owner: type[Struct], v: str) -> str:
        """Source of a condition true when tagged field value ``v`` is not its default."""
        value, is_factory = field_default(f, owner._children)
        if not is_factory:
            if value is None:
                return f"{v} is not None"
            return f"{v} != {self.literal(value)}"
        if value is list:
            return f"{v} is None or len({v}) != 0" if not f.nullable.empty else f"len({v}) != 0"
        sub = owner._children[f.attr]
        simple = all(not c.is_array and not c.is_struct for c in sub._fields)
        if simple and f.nullable.empty:
            defaults = [(c.attr, field_default(c, {})[0]) for c in sub._fields]
            cond = " or ".join(f"{v}.{a} != {self.literal(d)}" for a, d in defaults)
            return f"{v}.__class__ is not {self.const(sub)} or {cond}"
        return f"{v} != {self.const(sub())}"

    def enc_tags(self, cls: type[Struct], obj: str, out: str, ind: int) -> None:
        """Tag buffer; fields equal to their default are left out (as Kafka does).

        The usual case, every tagged field at its default, costs one combined
        test and a single ``0`` byte; the per-field buffers are built only
        when something is actually tagged.
        """
        tagged = self.tagged(cls._fields)
        if not tagged:
            self.emit(ind, f"{out}.append(0)")
            return
        values = []
        for f in tagged:
            v = self.var("v")
            self.emit(ind, f"{v} = {obj}.{f.attr}")
            values.append((f, v, self.default_differs(f, cls, v)))
        self.emit(ind, f"if {' or '.join(f'({c})' for _f, _v, c in values)}:")
        ind += 1
        tn = self.var("tn")
        tb = self.var("tb")
        self.emit(ind, f"{tn} = 0")
        self.emit(ind, f"{tb} = bytearray()")
        for f, v, cond in values:
            self.emit(ind, f"if {cond}:")
            t = self.var("t")
            self.emit(ind + 1, f"{t} = bytearray()")
            fmt = self.fixed_format(f)
            if fmt is not None:
                self.emit(ind + 1, f"{t} += {self.packer(fmt)}({v})")
            else:
                self.enc_value(f, cls, v, t, ind + 1, main_out=False)
            self.emit(ind + 1, f"{tb} += {encode_uvarint(f.tag or 0)!r}")
            self.emit(ind + 1, f"{tb} += _uv(len({t}))")
            self.emit(ind + 1, f"{tb} += {t}")
            self.emit(ind + 1, f"{tn} += 1")
        self.emit(ind, f"{out} += _uv({tn})")
        self.emit(ind, f"{out} += {tb}")
        self.emit(ind - 1, "else:")
        self.emit(ind, f"{out}.append(0)")

    # -- decoding -----------------------------------------------------------

    def dec_uvarint(self, ind: int, n: str, big: bool = False) -> None:
        """Inline one-byte varint; ``big`` (record sets, bytes) also inlines two bytes."""
        self.emit(ind, f"{n} = buf[pos]")
        self.emit(ind, "pos += 1")
        if not big:
            self.emit(ind, f"if {n} > 127: {n}, pos = _uvs(buf, pos, {n})")
            return
        m = self.var("m")
        self.emit(ind, f"if {n} > 127:")
        self.emit(ind + 1, f"{m} = buf[pos]")
        self.emit(ind + 1, f"if {m} < 128:")
        self.emit(ind + 2, f"{n} = ({n} & 127) | ({m} << 7)")
        self.emit(ind + 2, "pos += 1")
        self.emit(ind + 1, f"else: {n}, pos = _uvs(buf, pos, {n})")

    def dec_len(self, ind: int, n: str, wide: bool, big: bool = False) -> None:
        """Read a length; afterwards ``n == -1`` means null, other negatives are bad."""
        if self.flex:
            self.dec_uvarint(ind, n, big)
            self.emit(ind, f"{n} -= 1")
        else:
            u, size = self.unpacker("i" if wide else "h")
            self.emit(ind, f"{n} = {u}(buf, pos)[0]")
            self.emit(ind, f"pos += {size}")

    def dec_null_branch(self, ind: int, n: str, nullable: bool, dest: str, where: str) -> None:
        """Emit ``if n < 0: dest = None (or raise)`` and open the ``else`` block."""
        self.emit(ind, f"if {n} < 0:")
        if nullable:
            if not self.flex:
                self.emit(ind + 1, f"if {n} != -1: raise _DE({f'negative length for {where}'!r})")
            self.emit(ind + 1, f"{dest} = None")
        else:
            self.emit(ind + 1, f"raise _DE({f'null or negative length for {where}'!r})")
        self.emit(ind, "else:")

    def default_source(self, f: Field, owner: type[Struct]) -> str:
        value, is_factory = field_default(f, owner._children)
        if is_factory:
            return "[]" if value is list else f"{self.const(value)}()"
        return self.literal(value)

    def dec_struct(self, cls: type[Struct], obj: str, ind: int, where: str) -> None:
        """Fill the already-created instance ``obj`` of ``cls`` from ``buf`` at ``pos``."""
        v = self.version
        run: list[tuple[str, str]] = []
        for f in cls._fields:
            if v not in f.versions or (self.flex and v in f.tagged):
                self.emit(ind, f"{obj}.{f.attr} = {self.default_source(f, cls)}")
        for f in self.present(cls._fields):
            fmt = self.fixed_format(f)
            if fmt is not None:
                run.append((fmt, f"{obj}.{f.attr}"))
                continue
            length = None
            if run and not self.flex and (f.is_array or not f.is_struct):
                # Classic length prefixes are fixed-width: read them with the run.
                length = self.var("n")
                run.append(("h" if f.type == "string" else "i", length))
            self.dec_flush(run, ind)
            self.dec_value(f, cls, f"{obj}.{f.attr}", ind, f"{where}.{f.attr}", length)
        self.dec_flush(run, ind)
        if self.flex:
            self.dec_tags(cls, obj, ind, where)

    def dec_flush(self, run: list[tuple[str, str]], ind: int) -> None:
        if not run:
            return
        fmt = "".join(r[0] for r in run)
        u, size = self.unpacker(fmt)
        if len(run) == 1:
            self.emit(ind, f"{run[0][1]} = {u}(buf, pos)[0]")
        else:
            self.emit(ind, f"{', '.join(r[1] for r in run)} = {u}(buf, pos)")
        self.emit(ind, f"pos += {size}")
        run.clear()

    def min_size(self, cls: type[Struct]) -> int:
        """Fewest bytes one instance can occupy in this version (bounds array counts)."""
        total = 1 if self.flex else 0
        for f in self.present(cls._fields):
            total += self.min_field_size(f, cls)
        return total

    def min_field_size(self, f: Field, owner: type[Struct]) -> int:
        fmt = self.fixed_format(f)
        if fmt is not None:
            return _struct.calcsize(">" + fmt)
        if self.flex:
            return 1
        if f.is_array or f.type in ("bytes", "records"):
            return 4
        if f.is_struct:
            return 1 if self.version in f.nullable else self.min_size(owner._children[f.attr])
        return 2

    def dec_value(
        self,
        f: Field,
        owner: type[Struct],
        dest: str,
        ind: int,
        where: str,
        length: str | None = None,
    ) -> None:
        """Decode ``f`` into ``dest``; ``length`` names an already-read length prefix."""
        nullable = self.version in f.nullable
        if f.is_array:
            n = length or self.var("n")
            if length is None:
                self.dec_len(ind, n, wide=True)
            self.dec_null_branch(ind, n, nullable, dest, where)
            ind += 1
            elem = f.elem_type
            fmt = FIXED_FORMATS.get(elem)
            if f.is_struct:
                sub = owner._children[f.attr]
                esize = self.min_size(sub)
            elif fmt is not None:
                esize = _struct.calcsize(">" + fmt)
            else:
                esize = 1 if self.flex else (2 if elem == "string" else 4)
            if esize:
                self.emit(
                    ind,
                    f"if {n} * {esize} > blen - pos: raise _DE({f'array too long for {where}'!r})",
                )
            if fmt is not None and len(fmt) == 1:
                self.emit(ind, f"{dest} = list(_unpack_from('>%d{fmt}' % {n}, buf, pos))")
                self.emit(ind, f"pos += {n} * {esize}")
                return
            lst = self.var("l")
            app = self.var("la")
            self.emit(ind, f"{lst} = []")
            self.emit(ind, f"{app} = {lst}.append")
            self.emit(ind, f"for _ in range({n}):")
            if f.is_struct:
                e = self.var("e")
                self.emit(ind + 1, f"{e} = _new({self.const(sub)})")
                self.dec_struct(sub, e, ind + 1, f"{where}[]")
            else:
                e = self.var("e")
                self.dec_scalar(elem, e, ind + 1, nullable=False, where=f"{where}[]")
            self.emit(ind + 1, f"{app}({e})")
            self.emit(ind, f"{dest} = {lst}")
            return
        if f.is_struct:
            sub = owner._children[f.attr]
            if nullable:
                m = self.var("m")
                u, _size = self.unpacker("b")
                self.emit(ind, f"{m} = {u}(buf, pos)[0]")
                self.emit(ind, "pos += 1")
                self.emit(ind, f"if {m} < 0:")
                self.emit(ind + 1, f"{dest} = None")
                self.emit(ind, "else:")
                ind += 1
            s = self.var("s")
            self.emit(ind, f"{s} = _new({self.const(sub)})")
            self.dec_struct(sub, s, ind, where)
            self.emit(ind, f"{dest} = {s}")
            return
        self.dec_scalar(f.type, dest, ind, nullable=nullable, where=where, length=length)

    def dec_scalar(
        self, t: str, dest: str, ind: int, nullable: bool, where: str, length: str | None = None
    ) -> None:
        fmt = FIXED_FORMATS.get(t)
        if fmt is not None:
            u, size = self.unpacker(fmt)
            self.emit(ind, f"{dest} = {u}(buf, pos)[0]")
            self.emit(ind, f"pos += {size}")
            return
        n = length or self.var("n")
        if length is None:
            self.dec_len(ind, n, wide=t != "string", big=t != "string")
        self.dec_null_branch(ind, n, nullable, dest, where)
        ind += 1
        e = self.var("x")
        self.emit(ind, f"{e} = pos + {n}")
        self.emit(ind, f"if {e} > blen: raise _DE({f'truncated {where}'!r})")
        if t == "string":
            self.emit(ind, f"{dest} = str(buf[pos:{e}], 'utf-8')")
        elif t == "bytes":
            self.emit(ind, f"{dest} = bytes(buf[pos:{e}])")
        else:
            self.emit(ind, f"{dest} = buf[pos:{e}]")
        self.emit(ind, f"pos = {e}")

    def dec_tags(self, cls: type[Struct], obj: str, ind: int, where: str) -> None:
        tagged = self.tagged(cls._fields)
        if not tagged:
            self.emit(ind, "if buf[pos]: pos = _skip(buf, pos)")
            self.emit(ind, "else: pos += 1")
            return
        nt = self.var("nt")
        self.dec_uvarint(ind, nt)
        self.emit(ind, f"for _ in range({nt}):")
        ind += 1
        tag = self.var("tag")
        size = self.var("sz")
        end = self.var("te")
        self.dec_uvarint(ind, tag)
        self.dec_uvarint(ind, size)
        self.emit(ind, f"{end} = pos + {size}")
        self.emit(ind, f"if {end} > blen: raise _DE({f'truncated tagged field in {where}'!r})")
        for i, f in enumerate(tagged):
            self.emit(ind, f"{'if' if i == 0 else 'elif'} {tag} == {f.tag}:")
            fmt = self.fixed_format(f)
            if fmt is not None:
                u, _size = self.unpacker(fmt)
                self.emit(ind + 1, f"{obj}.{f.attr} = {u}(buf, pos)[0]")
            else:
                self.dec_value(f, cls, f"{obj}.{f.attr}", ind + 1, f"{where}.{f.attr}")
        self.emit(ind, f"pos = {end}")


def _compile(cls: type[Message], version: int, kind: str) -> Callable[..., Any]:
    """Generate, compile and return the ``kind`` codec of ``cls`` at ``version``."""
    gen = _Gen(version, cls.is_flexible(version))
    if kind == "encode":
        gen.enc_struct(cls, "o", "out", 1, main_out=True)
        gen.emit(1, "return out")
        header = "def encode(o, out, chunks):"
        pre = []
    else:
        gen.emit(1, f"o = _new({gen.const(cls)})")
        gen.dec_struct(cls, "o", 1, cls.__name__)
        gen.emit(1, "return o, pos")
        header = "def decode(buf, pos):"
        pre = ["    blen = len(buf)"]
    body = [header, *pre, *("    " + p for p in gen.prologue.values()), *gen.lines]
    src = "\n".join(body) + "\n"
    filename = f"<kafkaproto {cls.__name__} v{version} {kind}>"
    # Register the source so tracebacks through generated code show real lines.
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compiled(src, filename), gen.ns)  # noqa: S102 - generated from declarations
    cls._sources[(version, kind)] = src
    logger.debug("compiled %s v%d %s (%d lines)", cls.__name__, version, kind, len(body))
    fn: Callable[..., Any] = gen.ns[kind]
    return fn
