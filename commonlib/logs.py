"""The one log format of every process: the server, its ``--mqtt-bridge`` supervisor and
the bridge. Text by default (``2026-01-01 12:00:00,000 INFO logger: message``), or JSON
lines (one object per record, ``extra`` fields included) for log collectors.

The bridge child writes to the same stderr as the server, so both must speak the same
format for one collector to read the stream: ``logserver --log-format`` is handed to
the child, and both call :func:`setup` from here (``commonlib``: neither program
imports the other).
"""

from __future__ import annotations

import json
import logging
import time

FORMATS = ("text", "json")
DEFAULT_FORMAT = "text"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_STD = set(vars(logging.makeLogRecord({})))

# Control characters (C0, DEL, C1) and Unicode line separators, each as a visible escape:
# a peer-supplied string (an MQTT client id, a Kafka client id, a topic) in a message can
# then never start a forged line nor move a terminal's cursor.
_CONTROLS = [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (tabs kept)."""
    return text.translate(_ESCAPES)


class TextFormatter(logging.Formatter):
    """The text format, one line per record: the rendered message is escaped, a traceback
    (our own, after it) is not."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in _STD and k not in out:
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` ("text" or "json")."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT)


def setup(level: str = "INFO", fmt: str = DEFAULT_FORMAT) -> None:
    """One stderr handler in ``fmt`` on the root logger (replacing any: no line twice)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
