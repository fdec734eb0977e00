"""``logserver consume --format``: kcat's ``-f`` format strings.

``%t`` topic, ``%p`` partition, ``%o`` offset, ``%T`` timestamp (ms), ``%k`` key,
``%s`` value, ``%K``/``%S`` key/value length in bytes (-1 for null), ``%h`` headers as
``name=value`` pairs separated by commas, ``%%`` a percent sign; ``\\n``, ``\\t``,
``\\r`` and ``\\\\`` are escapes. ``--format json`` is ``--json``. A null key or value
prints as nothing, as kcat prints it. Keys and values are written as raw bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkaproto.records import Record

from .errors import CliError

Formatter = Callable[[str, int, Record], bytes]

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}


def _field(token: str) -> Callable[[str, int, Record], bytes]:
    def length(data: bytes | None) -> bytes:
        return b"-1" if data is None else str(len(data)).encode()

    fields: dict[str, Callable[[str, int, Record], bytes]] = {
        "t": lambda t, p, r: t.encode(),
        "p": lambda t, p, r: str(p).encode(),
        "o": lambda t, p, r: str(r.offset).encode(),
        "T": lambda t, p, r: str(r.timestamp).encode(),
        "k": lambda t, p, r: b"" if r.key is None else bytes(r.key),
        "s": lambda t, p, r: b"" if r.value is None else bytes(r.value),
        "K": lambda t, p, r: length(r.key),
        "S": lambda t, p, r: length(r.value),
        "h": lambda t, p, r: b",".join(
            k.encode() + b"=" + (b"" if v is None else bytes(v)) for k, v in r.headers),
        "%": lambda t, p, r: b"%",
    }
    found = fields.get(token)
    if found is None:
        raise CliError(f"--format: unknown token %{token} (known: %t %p %o %T %k %s %K %S "
                       f"%h %%)", exit_code=2)
    return found


def compile_format(fmt: str) -> Formatter:
    """A function printing one record as ``fmt`` says; CliError (usage) if it is bad."""
    parts: list[bytes | Callable[[str, int, Record], bytes]] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char in "%\\" and i + 1 == len(fmt):
            raise CliError(f"--format ends with a lone {char!r}", exit_code=2)
        if char == "%":
            if literal:
                parts.append(bytes(literal))
                literal.clear()
            parts.append(_field(fmt[i + 1]))
            i += 2
        elif char == "\\":
            escaped = _ESCAPES.get(fmt[i + 1])
            if escaped is None:
                raise CliError(f"--format: unknown escape \\{fmt[i + 1]}", exit_code=2)
            literal += escaped
            i += 2
        else:
            literal += char.encode()
            i += 1
    if literal:
        parts.append(bytes(literal))

    def render(topic: str, partition: int, record: Record) -> bytes:
        return b"".join(part if isinstance(part, bytes) else part(topic, partition, record)
                        for part in parts)
    return render
