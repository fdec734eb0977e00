"""The admin commands of ``logserver``: topics, groups, produce, consume, cluster.

They talk to any running server over the Kafka protocol (this one or Apache Kafka), in
the style of Kafka's tools and Redpanda's rpk: tables for people, ``--json`` for
scripts, ``--bootstrap-server`` (default ``$LOGSERVER_BOOTSTRAP_SERVER`` or
localhost:9092), one line on stderr and a documented exit code when something fails.
One module per command group; :mod:`.client` is the blocking socket glue.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from logserver.cli_parser import SubcommandUsageParser

from .client import DEFAULT_BOOTSTRAP, Cluster
from .errors import CliError

# The command modules are imported by build_parser, not here: the broker imports
# .consumer_protocol (DescribeGroups), which runs this file first, and every server's
# start-up paid for the whole command-line tool.
BOOTSTRAP_ENV = "LOGSERVER_BOOTSTRAP_SERVER"

EPILOG = ("Exit codes: 0 done, 1 the server refused or failed the operation, 2 bad usage, "
          "3 the server cannot be reached. Errors are one line on stderr.")


def common_options() -> argparse.ArgumentParser:
    """Options every command takes (after its name, as kafka-topics and rpk take them)."""
    common = argparse.ArgumentParser(add_help=False)
    default = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    common.add_argument("-b", "--bootstrap-server", default=default, metavar="HOST:PORT[,...]",
                        help=f"a server of the cluster (default {default}; env {BOOTSTRAP_ENV})")
    common.add_argument("--json", action="store_true", help="JSON output, for scripts")
    common.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for a connection or an answer (default 10)")
    return common


class _Parser(SubcommandUsageParser):
    """Every command's parser: the exit codes in its --help, no abbreviated options, and
    a bad flag reported with its own sub-command's usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EPILOG)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from . import acl, configs, consume, group, produce, topic
    from . import cluster as cluster_cmd

    parser = _Parser(prog="logserver",
                     description="Admin commands: talk to a running server (or any Kafka cluster).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = common_options()
    topic.register(commands, common)
    group.register(commands, common)
    produce.register(commands, common)
    consume.register(commands, common)
    cluster_cmd.register(commands, common)
    configs.register(commands, common)
    acl.register(commands, common)
    return parser


def main(argv: list[str]) -> int:
    """Run one admin command; its exit code."""
    args = build_parser().parse_args(argv)
    try:
        client = Cluster(args.bootstrap_server, timeout=args.timeout)
        try:
            code: int = args.func(client, args)
        finally:
            client.close()
    except CliError as exc:
        print(f"logserver: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `logserver consume ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    return code


__all__ = ["main"]
