"""``python -m tests.faults.faulty_server [--enospc-flag PATH] -- LOGSERVER ARGS``.

Runs the real ``logserver`` command in this process after installing test faults by
replacing the segment module's writer function. Tests that need faults start the
server through this launcher (``ServerProcess(launcher=...)``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from logserver import cli
from logserver.log import segment

from .injection import enospc_writer

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.faulty_server")
    parser.add_argument("--enospc-flag", type=Path,
                        help="segment writes fail like a full disk while this file exists")
    parser.add_argument("server_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    server_args = args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args
    if args.enospc_flag is not None:
        segment.pwrite = enospc_writer(args.enospc_flag)
    print(f"TEST FAULT INJECTION ACTIVE: enospc_flag={args.enospc_flag}", file=sys.stderr)
    return cli.main(server_args)


def launcher(*, enospc_flag: Path | None = None) -> list[str]:
    """The ``ServerProcess(launcher=...)`` arguments that start logserver with these faults."""
    args = ["-m", "tests.faults.faulty_server"]
    if enospc_flag is not None:
        args += ["--enospc-flag", str(enospc_flag)]
    return [*args, "--"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
