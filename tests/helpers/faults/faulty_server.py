"""``python -m tests.helpers.faults.faulty_server [--enospc-flag PATH] -- LOGSERVER ARGS``.

Runs the real ``logserver`` command in this process after installing test faults by
replacing the segment module's writer function. Tests that need faults start the
server through this launcher (``ServerProcess(launcher=...)``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from logserver import cli
from logserver.log import segment

from .injection import enospc_writer

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.faults.faulty_server")
    parser.add_argument("--enospc-flag", type=Path,
                        help="segment writes fail like a full disk while this file exists")
    parser.add_argument("--hold-recovery-flag", type=Path,
                        help="opening the data directory waits while this file exists")
    parser.add_argument("--hold-fsync-flag", type=Path,
                        help="every fsync waits while this file exists")
    parser.add_argument("server_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    server_args = args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args
    if args.enospc_flag is not None:
        segment.pwrite = enospc_writer(args.enospc_flag)
    if args.hold_recovery_flag is not None:
        hold_recovery(args.hold_recovery_flag)
    if args.hold_fsync_flag is not None:
        hold_fsync(args.hold_fsync_flag)
    print(f"TEST FAULT INJECTION ACTIVE: enospc_flag={args.enospc_flag} "
          f"hold_recovery_flag={args.hold_recovery_flag}", file=sys.stderr)
    return cli.main(server_args)


def hold_fsync(flag: Path) -> None:
    """fsyncs as slow as the test wants: each waits while ``flag`` exists (they run on the
    durability's worker thread, so requests that wait for one stay delayed meanwhile)."""
    real_fsync = os.fsync

    def held(fd: int) -> None:
        while flag.exists():
            time.sleep(0.02)
        real_fsync(fd)

    os.fsync = held


def hold_recovery(flag: Path) -> None:
    """A recovery as slow as the test wants: LogManager's start-up load (the recovery)
    waits while ``flag`` exists (it runs off the event loop, on an executor thread)."""
    from logserver.storage import segment_log

    class HeldLogManager(segment_log.LogManager):
        def __init__(self, *args: object, **kwargs: object) -> None:
            while flag.exists():
                time.sleep(0.02)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    segment_log.LogManager = HeldLogManager  # type: ignore[misc]


def launcher(*, enospc_flag: Path | None = None, hold_recovery_flag: Path | None = None,
             hold_fsync_flag: Path | None = None) -> list[str]:
    """The ``ServerProcess(launcher=...)`` arguments that start logserver with these faults."""
    args = ["-m", "tests.helpers.faults.faulty_server"]
    if enospc_flag is not None:
        args += ["--enospc-flag", str(enospc_flag)]
    if hold_recovery_flag is not None:
        args += ["--hold-recovery-flag", str(hold_recovery_flag)]
    if hold_fsync_flag is not None:
        args += ["--hold-fsync-flag", str(hold_fsync_flag)]
    return [*args, "--"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
