"""Background log cleanup: retention by time and size, the delete hook, and compaction.

Runs on the event loop every ``log.retention.check.interval.ms``. Retention never
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
    from logserver.broker import Broker

log = logging.getLogger(__name__)


async def run_retention(broker: Broker) -> None:
    """Apply retention and compaction periodically until cancelled."""
    interval = broker.config["log.retention.check.interval.ms"] / 1000
    while True:
        await asyncio.sleep(interval)
        try:
            deleted = run_once(broker)
            if deleted:
                await run_delete_hook(broker.config["log.segment.delete.hook"], deleted)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing cleanup must never stop the broker
            log.exception("log cleanup failed; retrying in %.0f s", interval)


def run_once(broker: Broker, now_ms: int | None = None) -> list[Path]:
    """One pass over every partition; returns the paths of the deleted segment files."""
    from logserver.log.cleaner import compact

    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    keep_for_hook = bool(broker.config["log.segment.delete.hook"])
    deleted: list[Path] = []
    for topic in broker.topic_names():
        configs = broker.topic_configs(topic) or {}
        policy = configs.get("cleanup.policy", broker.config["log.cleanup.policy"])
        tombstone_ms = int(configs.get("delete.retention.ms",
                                       broker.config["log.cleaner.delete.retention.ms"]))
        for index in range(broker.partition_count(topic) or 0):
            partition = broker.get_partition(topic, index)
            if partition is None:
                continue
            log_ = partition.log
            if "compact" in policy:
                compact(log_, tombstone_ms, now)
            if "delete" in policy:
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
