"""Readable tables for people, JSON for scripts: every command prints through here."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

Row = Sequence[object]


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Row]) -> str:
    """Columns left-aligned, two spaces apart, upper-case headers (as rpk and Kafka's tools)."""
    text = [[h.upper() for h in headers], *[[cell(v) for v in row] for row in rows]]
    widths = [max(len(line[i]) for line in text) for i in range(len(headers))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
                     for line in text)


def key_values(pairs: Sequence[tuple[str, object]]) -> str:
    """``KEY  value`` lines, as the header block of a describe."""
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.upper().ljust(width)}  {cell(v)}" for k, v in pairs)


def emit(as_json: bool, data: Any, render: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON (one document) or as ``render(data)``."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        text = render(data)
        if text:
            sys.stdout.write(text + "\n")


def json_line(data: Any) -> None:
    """One compact JSON document per line (records as they stream)."""
    sys.stdout.write(json.dumps(data, separators=(",", ":"), default=str) + "\n")
