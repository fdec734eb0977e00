"""The one log format of every process: the server, its ``--mqtt-bridge`` supervisor and
the bridge. Text by default (``2026-01-01 12:00:00,000 INFO logger: message``), or JSON
lines (one object per record, ``extra`` fields included) for log collectors.

The bridge child writes to the same stderr as the server, so both must speak the same
format for one collector to read the stream: ``logserver --log-format`` is handed to
the child, and both call :func:`setup` from here. This module lives in ``mqtt_bridge``
because the bridge runs without the server; the server already depends on the bridge.
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
    return JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)


def setup(level: str = "INFO", fmt: str = DEFAULT_FORMAT) -> None:
    """One stderr handler in ``fmt`` on the root logger (replacing any: no line twice)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
