"""The ``logserver`` command: parse settings, set up logging, run the broker."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from commonlib import logs
from logserver.cluster.errors import etcd_client_missing
from logserver.config import SETTINGS, ConfigError, env_name, load_config
from logserver.kafka_settings import ALIASES, IGNORED
from logserver.log.errors import CorruptLogError, DataDirError, LogDirLockedError
from logserver.security.store import AclFileError

log = logging.getLogger(__name__)

EXIT_CANNOT_START = 1  # a port taken, the data directory held by another process
EXIT_USAGE = 2  # an unknown flag or setting, an invalid value
EXIT_CORRUPT = 3  # start-up refused: repairing the log would lose data (see `logserver check`)
EXIT_BRIDGE_FAILED = 4  # the --mqtt-bridge child cannot run (e.g. its port is taken)


ADMIN_COMMANDS = ("topic", "group", "produce", "consume", "cluster", "config", "acl")  # logserver/admin_cli


def version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    import importlib.metadata  # here: ~1 MB (email, zipfile, csv) a running server never uses

    try:
        return importlib.metadata.version("logserver")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: run from a source tree)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logserver",
        allow_abbrev=False,  # --listen must not silently mean --listeners
        usage="%(prog)s [-c FILE] [--mqtt-bridge [HOST:PORT]] [--SETTING VALUE ...] "
        "| check DIR | repair DIR | scram add|delete|list --data-dir DIR "
        "| topic|group|produce|consume|cluster|config|acl ... | cluster up [--nodes N] | --version",
        description="A Kafka-protocol-compatible log server. Unmodified Kafka clients "
        "(Java, kafka-python, aiokafka, librdkafka/kcat) produce to and consume from it.",
        epilog="Every setting can also be given as an environment variable "
        "(e.g. LOGSERVER_LOG_DIRS for log.dirs) or in a properties file (-c). "
        "Precedence: flags > environment > file > defaults. An unknown LOGSERVER_* "
        "variable is ignored with a warning naming it, and the service links Docker and "
        "Kubernetes inject for a service named logserver (LOGSERVER_PORT=tcp://..., "
        "LOGSERVER_SERVICE_HOST, LOGSERVER_PORT_9092_TCP...) are ignored quietly. "
        "Kafka settings with no meaning here are ignored with a warning naming each: "
        + ", ".join(IGNORED) + ". "
        "Offline tools: `logserver check DIR`, `logserver repair DIR`, `logserver scram "
        "add|delete|list --data-dir DIR` (SASL/SCRAM users; see `logserver scram --help`). "
        "Admin commands for a running server (or any Kafka cluster): `logserver topic`, "
        "`group`, `produce`, `consume`, `cluster`, `config`, `acl` (each with --help). "
        "Exit codes: 0 stopped cleanly (SIGTERM, Ctrl-C), 1 cannot start (a port taken, "
        "the data directory in use by another process), 2 bad flag or setting, 3 the log "
        "is damaged beyond a torn tail, 4 the MQTT bridge cannot run.",
    )
    parser.add_argument("-c", "--config", type=Path, metavar="FILE",
                        help="Java-properties file with settings (key=value)")
    parser.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="set any setting, as kafka-server-start does (repeatable)")
    parser.add_argument("--mqtt-bridge", nargs="?", const="127.0.0.1:1883", metavar="HOST:PORT",
                        help="also run the MQTT bridge (mqtt-bridge) as a child process, listening "
                        "on HOST:PORT (default 127.0.0.1:1883) and writing to this server")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--log-level", default="INFO", choices=logs.LEVELS,
                        help="logging verbosity (default INFO)")
    parser.add_argument("--log-format", default=logs.DEFAULT_FORMAT, choices=logs.FORMATS,
                        help="log lines on stderr: text, or one JSON object per line "
                        f"(default {logs.DEFAULT_FORMAT}); the --mqtt-bridge child logs alike")
    settings = parser.add_argument_group("settings (Kafka's names)")
    for setting in SETTINGS.values():
        default = "unset" if setting.default is None else setting.default
        settings.add_argument(f"--{setting.name}", dest=setting.name, metavar="VALUE",
                              help=f"{setting.doc} (default {default}; env {env_name(setting.name)})")
    aliases = parser.add_argument_group("Kafka's other names (a stock server.properties works)")
    for name, alias in ALIASES.items():
        unit = "" if alias.factor is None else f", in {name.rsplit('.', 1)[1]}"
        aliases.add_argument(f"--{name}", dest=name, metavar="VALUE",
                             help=f"{alias.target}{unit}")
    return parser


# Flags other servers use, and the setting that does their job here.
_OTHER_FLAGS = {
    "listeners PLAINTEXT://HOST:PORT": ("port", "p", "host", "bind", "listen", "address", "addr"),
    "log.dirs DIR": ("data-dir", "datadir", "data", "dir", "log-dir", "log-dirs", "logdir",
                     "data-directory", "storage"),
    "node.id ID": ("broker-id", "node-id", "id"),
    "num.partitions N": ("partitions",),
    "advertised.listeners PLAINTEXT://HOST:PORT": ("advertise", "advertised-host",
                                                   "advertised-address"),
}


def unknown_flag_message(unknown: list[str]) -> str:
    """Name the first unknown flag and the setting to use instead, when one fits."""
    flags = [arg for arg in unknown if arg.startswith("-")]
    if not flags:
        return f"unexpected argument {unknown[0]!r} (settings are flags: --NAME VALUE)"
    flag = flags[0]
    bare = flag.lstrip("-").split("=", 1)[0]
    for use, names in _OTHER_FLAGS.items():
        if bare.lower() in names:
            return f"unknown flag {flag}: use --{use} (Kafka's setting names; see --help)"
    dotted = bare.replace("-", ".").replace("_", ".").lower()
    if dotted in SETTINGS or dotted in ALIASES:
        return f"unknown flag {flag}: use --{dotted} VALUE (Kafka's setting names, with dots)"
    close = difflib.get_close_matches(dotted, [*SETTINGS, *ALIASES], n=1)
    hint = f"; did you mean --{close[0]}?" if close else "; see --help for every setting"
    return f"unknown flag {flag}{hint}"


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list and args_list[0] in ("check", "repair"):
        from logserver.log.check import main as check_main

        return check_main(args_list)
    if args_list[:2] == ["cluster", "up"]:  # a local cluster (logserver/cluster/local.py)
        from logserver.cluster.local import main as cluster_main

        return cluster_main(args_list[1:])
    if args_list and args_list[0] == "scram":
        from logserver.security.scram_cli import main as scram_main

        return scram_main(args_list)
    if args_list and args_list[0] in ADMIN_COMMANDS:
        from logserver.admin_cli import main as admin_main

        return admin_main(args_list)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(unknown_flag_message(unknown))
    flags = {name: value for name, value in vars(args).items()
             if (name in SETTINGS or name in ALIASES) and value is not None}
    for item in args.override:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override expects NAME=VALUE, got {item!r}")
        flags[name.strip()] = value
    logs.setup(args.log_level, args.log_format)

    def fail(message: str) -> None:
        """A start-up failure: one line, in the log format when that is JSON."""
        if args.log_format == "json":
            log.error("%s", message)
        else:
            print(f"logserver: {message}", file=sys.stderr)

    try:
        config = load_config(flags, args.config)
    except ConfigError as exc:
        fail(str(exc))
        return EXIT_USAGE
    if config["cluster.etcd.endpoints"] and (missing := etcd_client_missing()) is not None:
        fail(missing)
        return EXIT_USAGE
    from logserver.cluster.txn_state_migration import PreReplicationTxnStateError
    from logserver.cluster_meta import InconsistentClusterIdError, NodeIdMismatchError
    from logserver.server import BridgeFailed, run_server

    bridge_args = ["--log-format", args.log_format, "--log-level", args.log_level]
    try:
        _event_loop_runner()(run_server(config, mqtt_bridge=args.mqtt_bridge,
                                        bridge_args=bridge_args))
    except KeyboardInterrupt:
        pass
    except BridgeFailed:  # the supervisor logged why
        return EXIT_BRIDGE_FAILED
    except ConfigError as exc:  # a listener's security cannot be honoured (checked at start)
        print(f"logserver: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (PreReplicationTxnStateError, InconsistentClusterIdError,
            NodeIdMismatchError) as exc:
        fail(f"refusing to start: {exc}")
        return EXIT_CANNOT_START
    except LogDirLockedError as exc:
        fail(f"cannot start: {exc} (another logserver, or `logserver repair`, "
             f"holds its lock file; each server needs its own --log.dirs)")
        return EXIT_CANNOT_START
    except DataDirError as exc:
        fail(f"cannot start: {exc}; `logserver check {config.data_dir}` lists every problem")
        return EXIT_CANNOT_START
    except (OSError, AclFileError) as exc:
        log.error("cannot start: %s", exc)
        return EXIT_CANNOT_START
    except CorruptLogError as exc:
        fail(f"refusing to start: {exc}\n"
             f"The damaged segment was left as it is. To cut the damage off (and lose what "
             f"follows it), "
             f"run `logserver repair {config.data_dir}` or start with "
             f"--log.recovery.allow.data.loss true; `logserver check {config.data_dir}` "
             f"lists every problem.")
        return EXIT_CORRUPT
    return 0


def _event_loop_runner() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """uvloop.run when uvloop is installed (the 'fast' extra), else asyncio.run.

    uvloop does less Python work per socket read and write (benchmarks/README.md has the
    figures). LOGSERVER_EVENT_LOOP=asyncio forces the standard loop.
    """
    if os.environ.get("LOGSERVER_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run
    return asyncio.run


if __name__ == "__main__":
    sys.exit(main())
