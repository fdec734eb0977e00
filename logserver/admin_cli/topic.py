"""``logserver topic list|describe|create|delete|alter-config|add-partitions``.

Metadata, DescribeConfigs, ListOffsets, CreateTopics, DeleteTopics,
IncrementalAlterConfigs and CreatePartitions: the standard admin APIs that Kafka's
``kafka-topics``/``kafka-configs`` and ``rpk topic`` use, so any Kafka server answers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkaproto.messages.admin_alter import OP_DELETE, OP_SET

from .client import Cluster
from .cluster_health import overview
from .delete_records import register as register_delete_records
from .errors import CliError, error_name, kafka_error
from .offsets import EARLIEST, LATEST, list_offsets
from .output import emit, key_values, table
from .reassign import register as register_reassign

RESOURCE_TOPIC = 2  # DescribeConfigs/IncrementalAlterConfigs resource type
TIMEOUT_MS = 30_000
#: Kafka's ConfigSource values, by name.
CONFIG_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    topic = commands.add_parser("topic", help="list, describe, create, delete and change topics",
                                description="Topics: list, describe, create, delete, "
                                "alter-config, add-partitions.")
    sub = topic.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("list", parents=[common], help="topics with partition and replica counts",
                       description="List the topics (internal ones with -i).")
    p.add_argument("-i", "--internal", action="store_true", help="include internal topics")
    p.add_argument("--under-replicated", "--under-replicated-partitions",
                   dest="under_replicated", action="store_true",
                   help="list the partitions whose ISR is smaller than their replicas "
                   "(kafka-topics --under-replicated-partitions)")
    p.add_argument("--unavailable", "--unavailable-partitions", dest="unavailable",
                   action="store_true", help="list the partitions without a live leader")
    p.set_defaults(func=list_topics)

    p = sub.add_parser("describe", parents=[common], help="partitions, offsets and configs",
                       description="Describe topics: partitions with leader, replicas, log "
                       "start offset and high watermark, and every config with its source.")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.set_defaults(func=describe_topics)

    p = sub.add_parser("create", parents=[common], help="create topics",
                       description="Create topics (CreateTopics).")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1, metavar="N",
                   help="partitions (default: the server's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1, metavar="N",
                   help="replicas per partition (default: the server's default)")
    p.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config, e.g. cleanup.policy=compact (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="a topic that exists already is not an error")
    p.add_argument("--validate-only", action="store_true", help="check, create nothing")
    p.set_defaults(func=create_topics)

    p = sub.add_parser("delete", parents=[common], help="delete topics",
                       description="Delete topics and their data (DeleteTopics).")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true",
                   help="a topic that does not exist is not an error")
    p.set_defaults(func=delete_topics)
    register_delete_records(sub, common)

    p = sub.add_parser("alter-config", parents=[common], help="set or delete topic configs",
                       description="Change a topic's configs without restating the others "
                       "(IncrementalAlterConfigs), as kafka-configs --alter does.")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config (repeatable)")
    p.add_argument("-d", "--delete", action="append", default=[], metavar="KEY",
                   help="remove an override: back to the default (repeatable)")
    p.add_argument("--add-config", action="append", default=[], metavar="K1=V1,K2=V2",
                   help="Kafka's spelling of --set, comma-separated")
    p.add_argument("--delete-config", action="append", default=[], metavar="K1,K2",
                   help="Kafka's spelling of --delete, comma-separated")
    p.add_argument("--validate-only", action="store_true", help="check, change nothing")
    p.set_defaults(func=alter_config)

    p = sub.add_parser("add-partitions", parents=[common], help="add partitions to topics",
                       description="Add partitions (CreatePartitions). Partitions can only be "
                       "added: records keep their partition, so keys move to new partitions "
                       "only for new records.")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("-n", "--num", type=int, metavar="N", help="partitions to add")
    how.add_argument("--total", "--partitions", dest="total", type=int, metavar="N",
                     help="the new total (kafka-topics --alter --partitions)")
    p.add_argument("--validate-only", action="store_true", help="check, change nothing")
    p.set_defaults(func=add_partitions)
    register_reassign(sub, common)


# ---- list / describe ------------------------------------------------------------------
def list_topics(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.under_replicated or args.unavailable:
        return _list_partitions(cluster, args)
    metadata = cluster.metadata(None)
    rows = [{"name": t.name, "partitions": len(t.partitions),
             "replicas": max((len(p.replica_nodes) for p in t.partitions), default=0),
             "internal": bool(t.is_internal)}
            for t in sorted(metadata.topics, key=lambda t: t.name or "")
            if t.error_code == 0 and (args.internal or not t.is_internal)]
    emit(args.json, rows, lambda rows: table(
        ["name", "partitions", "replicas"],
        [[r["name"], r["partitions"], r["replicas"]] for r in rows]))
    return 0


def _list_partitions(cluster: Cluster, args: argparse.Namespace) -> int:
    """The partitions that are under-replicated and/or without a live leader, as the
    health overview counts them (cluster_health.py): every topic, internal ones too."""
    report = overview(cluster)
    wanted = set()
    if args.under_replicated:
        wanted |= set(report["under_replicated_partitions"])
    if args.unavailable:
        wanted |= set(report["leaderless_partitions"])
    metadata = cluster.metadata(None)
    rows = [{"topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
             "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes)}
            for t in sorted(metadata.topics, key=lambda t: t.name or "")
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
            if f"{t.name}/{p.partition_index}" in wanted]
    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "leader", "replicas", "isr"],
        [[r["topic"], r["partition"], r["leader"], r["replicas"], r["isr"]] for r in rows]))
    return 0


def describe_topics(cluster: Cluster, args: argparse.Namespace) -> int:
    described = [_describe(cluster, topic) for topic in args.topics]
    emit(args.json, described if len(described) > 1 else described[0],
         lambda _: "\n\n".join(_render_topic(d) for d in described))
    return 0


def _describe(cluster: Cluster, topic: str) -> dict[str, Any]:
    metadata = cluster.metadata([topic])
    meta = next((t for t in metadata.topics if t.name == topic), None)
    if meta is None or meta.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CliError(f"unknown topic {topic!r}")
    if meta.error_code:
        raise kafka_error(f"topic {topic!r}", meta.error_code)
    leaders = {(topic, p.partition_index): p.leader_id for p in meta.partitions}
    start = list_offsets(cluster, leaders, EARLIEST)
    end = list_offsets(cluster, leaders, LATEST)
    partitions = [{"partition": p.partition_index, "leader": p.leader_id,
                   "leader_epoch": p.leader_epoch, "replicas": list(p.replica_nodes),
                   "isr": list(p.isr_nodes), "log_start_offset": start[(topic, p.partition_index)],
                   "high_watermark": end[(topic, p.partition_index)]}
                  for p in sorted(meta.partitions, key=lambda p: p.partition_index)]
    return {"name": topic, "internal": bool(meta.is_internal),
            "partitions": partitions, "configs": _configs(cluster, topic)}


def _configs(cluster: Cluster, topic: str) -> list[dict[str, Any]]:
    link = cluster.any()
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=topic, configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    response = link.ask(ApiKey.DESCRIBE_CONFIGS, request, ceiling=4)
    (result,) = response.results
    if result.error_code:
        raise kafka_error(f"configs of topic {topic!r}", result.error_code, result.error_message)
    return [{"name": c.name, "value": None if c.is_sensitive else c.value,
             "source": CONFIG_SOURCES.get(c.config_source, str(c.config_source)),
             "read_only": bool(c.read_only), "sensitive": bool(c.is_sensitive)}
            for c in sorted(result.configs, key=lambda c: c.name)]


def _render_topic(d: dict[str, Any]) -> str:
    parts = d["partitions"]
    summary = key_values([("name", d["name"]), ("internal", d["internal"]),
                          ("partitions", len(parts)),
                          ("replicas", max((len(p["replicas"]) for p in parts), default=0))])
    configs = table(["key", "value", "source"],
                    [[c["name"], c["value"], c["source"]] for c in d["configs"]])
    partitions = table(
        ["partition", "leader", "epoch", "replicas", "isr", "log-start-offset", "high-watermark"],
        [[p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"],
          p["log_start_offset"], p["high_watermark"]] for p in parts])
    return "\n\n".join(f"{title}\n{'=' * len(title)}\n{body}" for title, body in
                       (("SUMMARY", summary), ("CONFIGS", configs), ("PARTITIONS", partitions)))


# ---- create / delete ------------------------------------------------------------------
def key_value(text: str, option: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise CliError(f"{option} expects KEY=VALUE, got {text!r}", exit_code=2)
    return key.strip(), value


def _report(args: argparse.Namespace, verb: str, results: list[dict[str, Any]]) -> int:
    """Print one row per topic; one stderr line per failure; exit 1 if any failed."""
    emit(args.json, results, lambda rows: table(
        ["topic", "status"], [[r["topic"], r["status"]] for r in rows]))
    failed = [r for r in results if r["error"]]
    for r in failed:
        print(f"logserver: {verb} topic {r['topic']!r}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


def _result(topic: str, code: int, message: str | None, ok: str) -> dict[str, Any]:
    if not code:
        return {"topic": topic, "status": ok, "error": None}
    error = error_name(code) + (f" ({message})" if message else "")
    return {"topic": topic, "status": error_name(code), "error": error}


def create_topics(cluster: Cluster, args: argparse.Namespace) -> int:
    configs = [key_value(c, "--config") for c in args.config]
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=args.partitions, replication_factor=args.replication_factor,
        assignments=[], configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                 for k, v in configs])
        for name in args.topics], timeout_ms=TIMEOUT_MS, validate_only=args.validate_only)
    response = cluster.any().ask(ApiKey.CREATE_TOPICS, request, ceiling=7)
    results = []
    for t in response.topics:
        if t.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            results.append({"topic": t.name, "status": "EXISTS", "error": None})
        else:
            results.append(_result(t.name, t.error_code, t.error_message,
                                   "VALID" if args.validate_only else "OK"))
    return _report(args, "create", results)


def delete_topics(cluster: Cluster, args: argparse.Namespace) -> int:
    request = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=bytes(16)) for n in args.topics],
        topic_names=list(args.topics), timeout_ms=TIMEOUT_MS)
    response = cluster.any().ask(ApiKey.DELETE_TOPICS, request, ceiling=6)
    results = []
    for t in response.responses:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            results.append({"topic": t.name, "status": "ABSENT", "error": None})
        else:
            results.append(_result(t.name, t.error_code, t.error_message, "OK"))
    return _report(args, "delete", results)


# ---- alter-config / add-partitions ---------------------------------------------------
def alter_config(cluster: Cluster, args: argparse.Namespace) -> int:
    sets = [key_value(s, "--set") for s in args.set]
    for group in args.add_config:
        sets += [key_value(s, "--add-config") for s in group.split(",") if s.strip()]
    deletes = [*args.delete]
    for group in args.delete_config:
        deletes += [k.strip() for k in group.split(",") if k.strip()]
    if not sets and not deletes:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY", exit_code=2)
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    changes = ([Config(name=k, config_operation=OP_SET, value=v) for k, v in sets]
               + [Config(name=k, config_operation=OP_DELETE, value=None) for k in deletes])
    request = IncrementalAlterConfigsRequest(resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=RESOURCE_TOPIC, resource_name=topic, configs=changes)
        for topic in args.topics], validate_only=args.validate_only)
    response = cluster.any().ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, ceiling=1)
    return _report(args, "alter-config", [
        _result(r.resource_name, r.error_code, r.error_message,
                "VALID" if args.validate_only else "OK")
        for r in response.responses])


def add_partitions(cluster: Cluster, args: argparse.Namespace) -> int:
    totals = {}
    for topic in args.topics:
        if args.total is not None:
            totals[topic] = args.total
        else:
            if args.num < 1:
                raise CliError("--num must be at least 1", exit_code=2)
            totals[topic] = len(cluster.topic_partitions(topic)) + args.num
    request = CreatePartitionsRequest(topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=t, count=n, assignments=None)
        for t, n in totals.items()], timeout_ms=TIMEOUT_MS, validate_only=args.validate_only)
    response = cluster.any().ask(ApiKey.CREATE_PARTITIONS, request, ceiling=3)
    return _report(args, "add-partitions", [
        _result(r.name, r.error_code, r.error_message,
                ("VALID" if args.validate_only else "OK") + f" ({totals.get(r.name)} partitions)")
        for r in response.results])
