"""``logserver config describe|alter``: topic and broker configs, as kafka-configs does them.

DescribeConfigs and IncrementalAlterConfigs on one entity: ``--topic NAME``,
``--broker ID`` (that broker's dynamic configs) or ``--broker-defaults`` (the dynamic
default of every broker, kafka-configs' ``--entity-default``). ``describe`` shows the
dynamic overrides (``--all``: every config with its source); ``alter`` sets and deletes
without restating the others.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafkaproto.messages.admin_alter import OP_DELETE, OP_SET

from .client import Cluster
from .errors import CliError, error_name, kafka_error
from .output import emit, table

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
#: Kafka's ConfigSource values, by name.
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
           5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
DYNAMIC = (1, 2, 3)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    config = commands.add_parser("config", help="topic and broker configs (kafka-configs)",
                                 description="Describe and change the configs of a topic or "
                                 "a broker, as kafka-configs does.")
    sub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("describe", parents=[common], help="configs with their source",
                       description="The dynamic configs of a topic or broker (--all: every "
                       "config, with its source).")
    _entity(p)
    p.add_argument("--all", action="store_true", help="every config, not only overrides")
    p.set_defaults(func=describe)
    p = sub.add_parser("alter", parents=[common], help="set or delete configs",
                       description="Set and delete configs of a topic or broker "
                       "(IncrementalAlterConfigs), the others left as they are.")
    _entity(p)
    p.add_argument("--set", "--add-config", dest="set", action="append", default=[],
                   metavar="KEY=VALUE", help="set a config (repeatable; comma-separated too)")
    p.add_argument("--delete", "--delete-config", dest="delete", action="append", default=[],
                   metavar="KEY", help="back to the default (repeatable; comma-separated too)")
    p.add_argument("--validate-only", action="store_true", help="check, change nothing")
    p.set_defaults(func=alter)


def _entity(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="NAME")
    which.add_argument("--broker", type=int, metavar="ID")
    which.add_argument("--broker-defaults", action="store_true",
                       help="the dynamic default of every broker (kafka-configs --entity-default)")


def _resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resource type, resource name, what to call it in messages)."""
    if args.topic is not None:
        return RESOURCE_TOPIC, args.topic, f"topic {args.topic!r}"
    if args.broker is not None:
        return RESOURCE_BROKER, str(args.broker), f"broker {args.broker}"
    return RESOURCE_BROKER, "", "the broker defaults"


def describe(cluster: Cluster, args: argparse.Namespace) -> int:
    kind, name, what = _resource(args)
    link = cluster.node(args.broker) if args.broker is not None else cluster.any()
    response = link.ask(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=kind, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False), ceiling=4)
    (result,) = response.results
    if result.error_code:
        raise kafka_error(f"configs of {what}", result.error_code, result.error_message)
    rows = [{"name": c.name, "value": None if c.is_sensitive else c.value,
             "source": SOURCES.get(c.config_source, str(c.config_source)),
             "read_only": bool(c.read_only), "sensitive": bool(c.is_sensitive)}
            for c in sorted(result.configs, key=lambda c: c.name)
            if args.all or c.config_source in DYNAMIC]
    emit(args.json, rows, lambda rows: table(
        ["name", "value", "source"], [[r["name"], r["value"], r["source"]] for r in rows]))
    return 0


def _pairs(items: list[str], option: str) -> list[tuple[str, str]]:
    out = []
    for group in items:
        for item in (part for part in group.split(",") if part.strip()):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"{option} expects KEY=VALUE, got {item!r}", exit_code=2)
            out.append((key.strip(), value))
    return out


def alter(cluster: Cluster, args: argparse.Namespace) -> int:
    kind, name, what = _resource(args)
    sets = _pairs(args.set, "--set")
    deletes = [k.strip() for group in args.delete for k in group.split(",") if k.strip()]
    if not sets and not deletes:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY", exit_code=2)
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    request = IncrementalAlterConfigsRequest(resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=kind, resource_name=name, configs=[
                *(Config(name=k, config_operation=OP_SET, value=v) for k, v in sets),
                *(Config(name=k, config_operation=OP_DELETE, value=None) for k in deletes)])],
        validate_only=args.validate_only)
    link = cluster.node(args.broker) if args.broker is not None else cluster.any()
    response = link.ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, ceiling=1)
    (result,) = response.responses
    status = "VALID" if args.validate_only else "OK"
    if result.error_code:
        status = error_name(result.error_code)
        message = status + (f" ({result.error_message})" if result.error_message else "")
        print(f"logserver: alter configs of {what}: {message}", file=sys.stderr)
    emit(args.json, {"entity": what, "status": status},
         lambda d: f"{d['entity']}: {d['status']}")
    return 1 if result.error_code else 0
