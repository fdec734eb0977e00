"""The log cleaner's own cadence: compaction every ``log.cleaner.backoff.ms``.

As Kafka's cleaner thread, compaction does not wait for the retention check
(``log.retention.check.interval.ms``, 5 minutes): every ``log.cleaner.backoff.ms``
(15 s) the event loop resolves each topic's cleanup policy and hands one cleaner pass
to the log manager's storage worker, awaiting it, so a compacted topic's segments are
cleaned within that time of being rolled and no request waits for compaction. A pass
touches only the logs with something to clean (``Cleaner.needs_cleaning``: a segment
rolled since the last pass, or tombstones that may have expired), so an idle pass reads
no file.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from logserver.retention import cleanup_policies

if TYPE_CHECKING:
    from logserver.config import Config
    from logserver.log.manager import LogManager

log = logging.getLogger(__name__)

__all__ = ["run_cleaner"]


async def run_cleaner(manager: LogManager, config: Config) -> None:
    """Run a cleaner pass every ``log.cleaner.backoff.ms`` until cancelled."""
    backoff = config["log.cleaner.backoff.ms"] / 1000
    while True:
        await asyncio.sleep(backoff)
        try:
            cleaned = await manager.worker.run(manager.compact, cleanup_policies(manager))
            if cleaned:
                log.debug("log cleaner: %d logs cleaned", cleaned)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing pass must never stop the cleaner
            log.exception("log cleanup failed (compaction pass); retrying in %.1f s", backoff)
