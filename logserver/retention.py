"""Background log cleanup: retention by time and size, the delete hook, and compaction.

Runs on the event loop every ``log.retention.check.interval.ms``, over the storage
engine's LogManager; each log's policy is its resolved TopicConfig. Retention never
deletes the active segment (the one taking appends). Deleted segments move the log start
offset forward; a fetch below it gets OFFSET_OUT_OF_RANGE and the consumer resets per
its ``auto.offset.reset``. With ``log.segment.delete.hook`` set, deleted ``.log`` files
are renamed ``*.log.deleted`` and the hook command is run with their paths as arguments;
they are unlinked when it exits (a crash before that: start-up removes them, the hook is
not run again). ``cleanup.policy=compact`` topics are compacted instead (see
logserver.log.cleaner); ``compact,delete`` gets both.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logserver.config import Config
    from logserver.log.manager import LogManager

log = logging.getLogger(__name__)


async def run_retention(manager: LogManager, config: Config) -> None:
    """Apply retention and compaction periodically until cancelled."""
    interval = config["log.retention.check.interval.ms"] / 1000
    hook = config["log.segment.delete.hook"]
    while True:
        await asyncio.sleep(interval)
        try:
            deleted = run_once(manager, keep_for_hook=bool(hook))
            if deleted:
                await run_delete_hook(hook, deleted)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing cleanup must never stop the broker
            log.exception("log cleanup failed; retrying in %.0f s", interval)


def run_once(manager: LogManager, now_ms: int | None = None, *,
             keep_for_hook: bool = False) -> list[Path]:
    """One pass over every partition; returns the paths of the deleted segment files."""
    from logserver.log.cleaner import compact

    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    deleted: list[Path] = []
    for log_ in manager.logs().values():
        config = log_.config
        if config.compact:
            compact(log_, config.delete_retention_ms, now)
        if config.delete:
            log_.delete_old_segments(now, keep_files=keep_for_hook)
            deleted.extend(log_.take_deleted_paths())
    return deleted


async def run_delete_hook(hook: str | None, paths: list[Path]) -> None:
    """Run the hook with the deleted paths, then unlink them (whatever the hook did)."""
    if hook:
        argv = [*shlex.split(hook), *map(str, paths)]
        try:
            process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL)
            code = await process.wait()
            if code:
                log.warning("delete hook %r exited with %d", hook, code)
            else:
                log.info("delete hook ran for %d segments", len(paths))
        except OSError as exc:
            log.error("delete hook %r could not run: %s", hook, exc)
    for path in paths:
        path.unlink(missing_ok=True)
