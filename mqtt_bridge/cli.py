"""``mqtt-bridge`` command line: settings from flags and an optional TOML file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import getpass
import logging
import signal
import socket
import sys
import tomllib
from collections.abc import Callable, Coroutine
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from commonlib import logs
from commonlib.bridge_exit import EXIT_CANNOT_LISTEN

from .auth import hash_password
from .config import BridgeConfig
from .mapping import DEFAULT_DOWNLINK, DEFAULT_UPLINK, Mapping, RuleError

if TYPE_CHECKING:
    from .bridge import Bridge

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    d = BridgeConfig()
    p = argparse.ArgumentParser(
        prog="mqtt-bridge",
        description=(
            "MQTT 3.1.1/5.0 server for devices that writes their messages into a Kafka-protocol "
            "log (logserver or any Kafka cluster) and delivers commands and broadcasts from the "
            "log back to them."
        ),
        epilog=(
            "Uplink rule: PATTERN=TOPIC[,key=KEY], e.g. "
            f"'{DEFAULT_UPLINK[0]}'. Downlink rule: KAFKA_TOPIC=MQTT_TOPIC[,qos=N][,retain], "
            f"e.g. '{DEFAULT_DOWNLINK[0]}'. Credentials file: mosquitto_passwd's format (or "
            "user:password lines, plain or the output of --hash-password). Without --acl-file a "
            "device may publish only under devices/{its client id}/ and subscribe only to what the "
            "downlink sends it. Logs go to stderr (--log-format); SIGUSR1 logs per-connection counters."
        ),
    )
    p.add_argument("-c", "--config", metavar="FILE", help="TOML file with settings (flag names, '_' for '-')")
    p.add_argument("--listen", metavar="HOST:PORT", help=f"MQTT listen address (default {d.host}:{d.port})")
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help=f"the log (default {d.bootstrap_servers})")
    p.add_argument("--uplink", action="append", metavar="RULE", help="uplink rule (repeatable; replaces the default)")
    p.add_argument("--downlink", action="append", metavar="RULE", help="downlink rule (repeatable; replaces the defaults)")
    g = p.add_argument_group("limits")
    for name, help_ in (
        ("max_connections", "concurrent connections"),
        ("max_connection_rate", "new connections per second from one address"),
        ("failed_login_delay_ms", "wait before an address's next login is checked after a failed one, ms; doubles per failure"),
        ("failed_login_delay_max_ms", "most that wait grows to, ms"),
        ("max_subscriptions", "subscriptions per client"),
        ("max_packet_size", "largest MQTT packet accepted, bytes"),
        ("max_topics", "distinct Kafka topics the uplink may write"),
        ("max_inflight", "outgoing QoS 1 messages awaiting PUBACK per connection"),
        ("max_queued", "outgoing messages queued per session"),
        ("max_sessions", "sessions (online and offline) in memory; further new sessions are refused"),
        ("max_retained_messages", "retained messages kept, 0 = no limit"),
        ("max_retained_bytes", "bytes of retained topics + payloads kept, 0 = no limit"),
        ("max_packets_before_connack", "packets held while a CONNECT is processed; more close the connection (0x97)"),
        ("max_bytes_before_connack", "bytes held while a CONNECT is processed; more close the connection (0x97)"),
        ("max_topic_levels", "levels of a topic name (PUBLISH) or filter (SUBSCRIBE)"),
        ("receive_maximum", "incoming unacknowledged QoS 1/2 PUBLISHes per v5 client"),
        ("max_session_bytes", "largest saved session state; subscriptions beyond it are refused"),
        ("persistent_client_expiration_s", "3.1.1 persistent sessions end this many seconds after the client left, 0 = never"),
    ):
        g.add_argument("--" + name.replace("_", "-"), type=int, metavar="N", help=f"{help_} (default {getattr(d, name)})")
    a = p.add_argument_group("authentication and authorization")
    a.add_argument("--credentials-file", metavar="FILE", help="password file (mosquitto_passwd); without it anonymous clients are allowed")
    a.add_argument("--no-anonymous", action="store_true", help="refuse clients without credentials")
    a.add_argument("--hash-password", action="store_true", help="read a password, print a hashed credentials secret ($7$, as mosquitto_passwd), exit")
    a.add_argument("--acl-file", metavar="FILE", help="access lists in mosquitto's acl_file format; replace the default device binding")
    a.add_argument("--uplink-topic", dest="uplink_topics", action="append", metavar="NAME",
                   help=f"Kafka topic the uplink may write, '*' globs allowed (repeatable; replaces the default {','.join(d.uplink_topics)})")
    t = p.add_argument_group("TLS")
    t.add_argument("--tls-listen", metavar="HOST:PORT", help=f"TLS listen address (default {d.host}:{d.tls_port}); needs --tls-certfile")
    t.add_argument("--tls-certfile", metavar="PEM", help="server certificate (chain); turns the TLS listener on")
    t.add_argument("--tls-keyfile", metavar="PEM", help="its private key (if not in the certificate file)")
    t.add_argument("--tls-cafile", metavar="PEM", help="CA certificates that sign client certificates")
    t.add_argument("--require-certificate", action="store_true", default=None, help="refuse TLS clients without a valid certificate")
    t.add_argument("--use-identity-as-username", action="store_true", default=None,
                   help="the client certificate's CN is the client's identity (no password asked on TLS)")
    t.add_argument("--no-plaintext", action="store_true", help="no plain listener (TLS only)")
    w = p.add_argument_group("MQTT over WebSockets (browsers; subprotocol mqtt, paths /mqtt and /)")
    w.add_argument("--ws-listen", metavar="HOST:PORT", help="WebSocket listen address (default: off)")
    w.add_argument("--wss-listen", metavar="HOST:PORT",
                   help="WebSocket over TLS listen address (default: off); uses --tls-certfile/--tls-keyfile/--tls-cafile")
    w.add_argument("--ws-allowed-origin", action="append", dest="ws_allowed_origins", metavar="ORIGIN",
                   help="a web page origin (https://app.example.com) allowed to connect besides pages of "
                        "this host; repeatable; * allows any page (default: this host's pages and non-browsers)")
    k = p.add_argument_group("log side")
    k.add_argument("--linger-ms", type=float, metavar="MS", help=f"producer linger (default {d.linger_ms})")
    k.add_argument("--batch-bytes", type=int, metavar="N", help=f"producer batch size per partition (default {d.batch_bytes})")
    k.add_argument("--delivery-timeout-s", type=float, metavar="S", help=f"give up on a log write after (default {d.delivery_timeout_s})")
    k.add_argument("--session-store", choices=("auto", "group", "topic"), help="where persistent sessions live: topic (compacted topic, the default; auto = topic) or group (OffsetCommit metadata, 4 KB cap)")
    k.add_argument("--session-commit-interval-s", type=float, metavar="S",
                   help=f"how often changed persistent sessions are saved (default {d.session_commit_interval_s})")
    k.add_argument("--session-topic", metavar="TOPIC", help=f"topic of the topic store (default {d.session_topic})")
    k.add_argument("--retained-topic", metavar="TOPIC", help=f"compacted topic of retained messages (default {d.retained_topic})")
    k.add_argument("--bridge-id", metavar="ID",
                   help="this bridge's name among several in front of one log, unique per bridge "
                   "(default host:port); sessions move between bridges by it")
    k.add_argument("--reuse-port", action="store_true", default=None,
                   help="SO_REUSEPORT on the MQTT listeners: run several bridge processes on one "
                   "port (each with its own --bridge-id) when one core is the ceiling")
    k.add_argument("--takeover-timeout-s", type=float, metavar="S",
                   help="how long a CONNECT waits for the bridge holding its session to hand it over "
                   f"(default {d.takeover_timeout_s})")
    k.add_argument("--group-prefix", metavar="PREFIX", help=f"group id prefix of the group store (default {d.group_prefix})")
    o = p.add_argument_group("operations")
    o.add_argument("--stats-interval-s", type=float, metavar="S", help=f"throughput counters log interval, 0 = off (default {d.stats_interval_s})")
    o.add_argument("--admin-listen", metavar="HOST:PORT",
                   help="admin HTTP listener: Prometheus /metrics and /v1/status (default off)")
    o.add_argument("--admin-fd", type=int, metavar="FD",
                   help="serve the admin API on this inherited listening socket "
                   "(logserver --mqtt-bridge passes one)")
    o.add_argument("--log-level", default="INFO", choices=logs.LEVELS)
    o.add_argument("--log-format", default=logs.DEFAULT_FORMAT, choices=logs.FORMATS,
                   help=f"log lines on stderr: text or JSON objects (default {logs.DEFAULT_FORMAT}; "
                   "the same format as logserver's)")
    return p


def config_from_args(args: argparse.Namespace) -> BridgeConfig:
    values: dict[str, Any] = {}
    if args.config:
        with open(args.config, "rb") as f:
            values.update({k.replace("-", "_"): v for k, v in tomllib.load(f).items()})
    names = {f.name for f in fields(BridgeConfig)}
    for name in names:
        v = getattr(args, name, None)
        if v is not None:
            values[name] = v
    if args.listen:
        host, _, port = args.listen.rpartition(":")
        values["host"] = host or "127.0.0.1"
        values["port"] = int(port)
    if args.admin_listen:
        host, _, port = args.admin_listen.rpartition(":")
        values["admin_host"] = host or "127.0.0.1"
        values["admin_port"] = int(port)
    if args.no_anonymous:
        values["allow_anonymous"] = False
    if args.tls_listen:
        host, _, port = args.tls_listen.rpartition(":")
        values["tls_host"] = host or None
        values["tls_port"] = int(port)
    for flag, prefix in ((args.ws_listen, "ws"), (args.wss_listen, "wss")):
        if flag:
            host, _, port = flag.rpartition(":")
            values[prefix + "_host"] = host or None
            values[prefix + "_port"] = int(port)
    if args.no_plaintext:
        values["plaintext"] = False
    cfg = BridgeConfig.from_mapping(values)
    Mapping.parse(cfg.uplink, cfg.downlink)  # fail early on bad rules
    return cfg


async def _serve(cfg: BridgeConfig, admin_fd: int | None = None) -> None:
    from .bridge import Bridge
    from .listeners import CannotListen

    bridge = Bridge(cfg)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, bridge.log_connections)
    admin = None
    if cfg.admin_port is not None or admin_fd is not None:  # up first: it reports while
        from .admin import AdminListener  # the bridge waits for the log

        sock = None if admin_fd is None else socket.socket(fileno=admin_fd)
        admin = AdminListener(bridge.snapshot, cfg.admin_host, cfg.admin_port or 0,
                              bridge.devices, sock, bridge.puback_latency)
        try:
            await admin.start()
        except OSError as exc:
            raise CannotListen(f"cannot listen on {cfg.admin_host}:{cfg.admin_port} "
                               f"(admin): {exc.strerror or exc}") from exc
    try:
        await _run_until_stopped(bridge, stop)
    finally:
        if admin is not None:
            await admin.close()


async def _run_until_stopped(bridge: Bridge, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    start = loop.create_task(bridge.start())
    stopper = loop.create_task(stop.wait())
    await asyncio.wait({start, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if start.done() and start.exception() is not None:
        error = start.exception()
        assert error is not None
        raise error
    if start.done():
        # What start-up built (modules, routing, sessions) lives as long as the process:
        # keep it out of the cyclic GC's full collections, which scanned it 1-2 times a
        # second under load (30-110 ms each, a sixth of the bridge's CPU at QoS 0).
        gc.freeze()
    await stopper
    start.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await start
    await bridge.stop()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.hash_password:
        pw = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
        sys.stdout.write(hash_password(pw) + "\n")
        return 0
    try:
        cfg = config_from_args(args)
    except (RuleError, ValueError, OSError, tomllib.TOMLDecodeError) as exc:
        parser.error(str(exc))
    logs.setup(args.log_level, args.log_format)
    run: Callable[[Coroutine[Any, Any, None]], None]
    try:
        import uvloop  # optional: the 'fast' extra; writev for shared fan-out buffers

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    from .listeners import CannotListen

    try:
        run(_serve(cfg, args.admin_fd))
    except KeyboardInterrupt:
        pass
    except CannotListen as exc:
        log.error("%s", exc, extra={"event": "cannot_listen"})
        return EXIT_CANNOT_LISTEN
    except (OSError, ValueError) as exc:  # e.g. a certificate file that cannot be read
        log.error("mqtt-bridge cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
