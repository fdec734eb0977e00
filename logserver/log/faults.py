"""Fault injection for tests only: switched on by ``LOGSERVER_TEST_FAULTS`` at start-up.

Production code never sets the variable, and without it nothing here is installed (the
segment writer stays ``os.pwrite``). The value is ``key=value`` pairs separated by ``;``:

``fsync_journal=PATH``
    After every successful fsync of segment data, append ``<path> <size>`` lines to
    PATH: what a power failure at that moment could not take away. The crash harness
    uses it to simulate a power loss (truncate every segment to its last fsynced size)
    after a kill -9, which by itself keeps the page cache.
``enospc_flag=PATH``
    While PATH exists, segment writes behave like a full disk: the first ``pwrite`` of
    an append writes half its bytes (a short write), the next raises ENOSPC. Removing
    the file is "space is back".
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

ENV = "LOGSERVER_TEST_FAULTS"

_installed = False


def parse(spec: str) -> dict[str, str]:
    options = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{ENV}: expected key=value, got {item!r}")
        options[key.strip()] = value.strip()
    unknown = set(options) - {"fsync_journal", "enospc_flag"}
    if unknown:
        raise ValueError(f"{ENV}: unknown fault(s) {sorted(unknown)}")
    return options


def install_from_env() -> None:
    """Install the faults named in the environment, once per process."""
    global _installed
    spec = os.environ.get(ENV)
    if not spec or _installed:
        return
    _installed = True
    options = parse(spec)
    from logserver.log import log as log_module
    from logserver.log import segment as segment_module

    if "fsync_journal" in options:
        log_module.fsync_observer = _journal_writer(Path(options["fsync_journal"]))
    if "enospc_flag" in options:
        segment_module.pwrite = _enospc_pwrite(Path(options["enospc_flag"]))
    logger.warning("TEST FAULT INJECTION ACTIVE: %s", options)


def _journal_writer(path: Path) -> Callable[[list[tuple[Path, int]]], None]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def observe(synced: list[tuple[Path, int]]) -> None:
        if synced:
            os.write(fd, "".join(f"{p} {size}\n" for p, size in synced).encode())

    return observe


def _enospc_pwrite(flag: Path) -> Callable[[int, object, int], int]:
    real = os.pwrite
    state = {"short_done": False}

    def pwrite(fd: int, data, position: int) -> int:  # type: ignore[no-untyped-def]
        if not flag.exists():
            state["short_done"] = False
            return real(fd, data, position)
        view = memoryview(data)
        if not state["short_done"] and len(view) > 1:
            state["short_done"] = True
            return real(fd, view[: len(view) // 2], position)
        state["short_done"] = False
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return pwrite
