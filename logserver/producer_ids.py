"""Producer ids that are never handed out twice, also across restarts and kill -9.

Ids are reserved on disk in blocks: the file holds the first id not yet reserved, and is
advanced (and fsynced) before any id of a new block is handed out. A crash wastes the
rest of a block, never reuses an id. ``take`` never touches the disk; ``reserve_block``
does (the storage engine runs it on its worker thread when ``take`` has nothing left).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._next = self._read_reserved_end()
        self._block_end = self._next

    def _read_reserved_end(self) -> int:
        try:
            return int(self._path.read_text().strip())
        except FileNotFoundError:
            return 0
        except ValueError as exc:
            raise RuntimeError(f"{self._path} is corrupt; refusing to risk reusing producer ids") from exc

    @property
    def exhausted(self) -> bool:
        return self._next >= self._block_end

    def take(self) -> int | None:
        """The next reserved id, or None when the block is used up."""
        if self._next >= self._block_end:
            return None
        producer_id = self._next
        self._next += 1
        return producer_id

    def reserve_block(self) -> None:
        """Reserve the next block durably (blocking: two fsyncs)."""
        end = self._block_end + BLOCK_SIZE
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            handle.write(f"{end}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._block_end = end
        log.debug("reserved producer ids up to %d", end)

    def allocate(self) -> int:
        """Blocking form of ``take`` + ``reserve_block`` (start-up and offline tools)."""
        producer_id = self.take()
        while producer_id is None:
            self.reserve_block()
            producer_id = self.take()
        return producer_id
