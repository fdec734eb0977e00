"""Disk faults injected into a real server process, from the outside of its code.

Installed only by the test launcher (``python -m tests.helpers.faults.faulty_server``), which
replaces the segment module's writer function before the server starts; production
code has no switch for it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

Writer = Callable[[int, "ReadableBuffer", int], int]


def enospc_writer(flag: Path, real: Writer = os.pwrite) -> Writer:
    """A ``pwrite`` that behaves like a full disk while ``flag`` exists.

    The first write of an append writes half its bytes (a short write), the next raises
    ENOSPC; removing the file is "space is back".
    """
    state = {"short_done": False}

    def pwrite(fd: int, data: ReadableBuffer, position: int) -> int:
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
