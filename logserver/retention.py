"""Background log cleanup: retention by time and size, and the delete hook.

Every ``log.retention.check.interval.ms`` the event loop resolves each topic's cleanup
policy and hands the pass to the log manager's storage worker, awaiting the result, so
deletes never block a request. Retention never deletes the active segment
(the one taking appends). Deleted segments move the log start offset forward; a fetch
below it gets OFFSET_OUT_OF_RANGE and the consumer resets per its ``auto.offset.reset``.
Deleted files are renamed ``*.deleted`` and removed after ``log.segment.delete.delay.ms``;
with ``log.segment.delete.hook`` set, the hook command is run with the deleted ``.log``
paths as arguments and the files are removed when it exits (a crash before that:
start-up removes them, the hook is not run again). ``cleanup.policy=compact`` topics are
compacted on the cleaner's own cadence instead (logserver.cleaner_schedule,
``log.cleaner.backoff.ms``); ``compact,delete`` gets both.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from logserver.log.deleter import remove_path
from logserver.log.manager import CleanupPolicy
from logserver.log.segment import DELETED_SUFFIX, LOG_SUFFIX
from logserver.log.worker import StorageWorker

if TYPE_CHECKING:
    from logserver.config import Config
    from logserver.log.manager import LogManager

log = logging.getLogger(__name__)


async def run_retention(manager: LogManager, config: Config) -> None:
    """Apply retention periodically until cancelled."""
    interval = config["log.retention.check.interval.ms"] / 1000
    hook = config["log.segment.delete.hook"]
    while True:
        await asyncio.sleep(interval)
        try:
            deleted = await run_once(manager, keep_for_hook=bool(hook))
            if deleted:
                await run_delete_hook(hook, deleted, manager.worker)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing cleanup must never stop the broker
            log.exception("log cleanup failed; retrying in %.0f s", interval)


def cleanup_policies(manager: LogManager) -> dict[str, CleanupPolicy]:
    """Each topic's cleanup.policy and delete.retention.ms, from its resolved TopicConfig."""
    policies = {}
    for (topic, partition), log_ in manager.logs().items():
        if partition == 0 or topic not in policies:
            config = log_.config
            policies[topic] = CleanupPolicy(compact=config.compact, delete=config.delete,
                                            delete_retention_ms=config.delete_retention_ms)
    return policies


async def run_once(manager: LogManager, now_ms: int | None = None, *,
                   keep_for_hook: bool = False) -> list[Path]:
    """One pass over every partition, on the storage worker; returns deleted segment files."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return await manager.worker.run(manager.cleanup, cleanup_policies(manager), now,
                                    keep_deleted=keep_for_hook)


def _deleted_files_of(log_path: Path) -> list[Path]:
    """A deleted segment's log file and its index files (all renamed ``*.deleted``)."""
    name = log_path.name
    suffix = LOG_SUFFIX + DELETED_SUFFIX
    if not name.endswith(suffix):
        return [log_path]
    stem = name[: -len(suffix)]
    return [log_path] + [log_path.with_name(stem + index + DELETED_SUFFIX)
                         for index in (".index", ".timeindex", ".txnindex")]


async def run_delete_hook(hook: str | None, paths: list[Path], worker: StorageWorker) -> None:
    """Run the hook with the deleted paths, then remove them on ``worker`` (whatever the
    hook did)."""
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
    doomed = [file for path in paths for file in _deleted_files_of(path)]
    await worker.run(_remove_all, doomed)


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        remove_path(path)
