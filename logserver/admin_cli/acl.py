"""``logserver acl list|create|delete``: Kafka ACLs, as kafka-acls does them.

DescribeAcls, CreateAcls and DeleteAcls. A resource is ``--topic``, ``--group``,
``--transactional-id`` or ``--cluster``, with ``--resource-pattern-type`` (literal or
prefixed; filters also take ``any`` and ``match``). ``create`` takes
``--allow-principal``/``--deny-principal`` (repeatable) and ``--operation``
(repeatable); ``list`` and ``delete`` take ``--principal``, ``--operation``,
``--permission`` as filters (absent: any).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from logserver.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

from .client import Cluster
from .errors import CliError, error_name, kafka_error
from .output import emit, table

Row = dict[str, Any]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    acl = commands.add_parser("acl", help="Kafka ACLs: list, create, delete (kafka-acls)",
                              description="Kafka ACLs (the server's authorizer must be on).")
    sub = acl.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("list", parents=[common], help="ACLs matching the filters",
                       description="List the ACLs (DescribeAcls) matching the filters.")
    _resource_options(p, required=False, patterns=("any", "match", "literal", "prefixed"))
    _filter_options(p)
    p.set_defaults(func=list_acls)
    p = sub.add_parser("create", parents=[common], help="add ACLs",
                       description="Add ACLs (CreateAcls): every principal x operation on "
                       "the resource.")
    _resource_options(p, required=True, patterns=("literal", "prefixed"))
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="e.g. User:alice (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--operation", action="append", required=True, metavar="OP",
                   type=_enum(AclOperation), help="read, write, describe, all, ... (repeatable)")
    p.add_argument("--host", default="*", help="the client host (default *: any)")
    p.set_defaults(func=create_acls)
    p = sub.add_parser("delete", parents=[common], help="remove the ACLs matching filters",
                       description="Remove the ACLs matching the filters (DeleteAcls).")
    _resource_options(p, required=False, patterns=("literal", "prefixed", "any", "match"))
    _filter_options(p)
    p.set_defaults(func=delete_acls)


def _enum(kind: Any) -> Any:
    def parse(text: str) -> Any:
        try:
            return kind[text.strip().upper().replace("-", "_")]
        except KeyError:
            names = ", ".join(m.name.lower() for m in kind if m.name not in ("UNKNOWN",))
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {names}") from None
    parse.__name__ = kind.__name__
    return parse


def _resource_options(p: argparse.ArgumentParser, *, required: bool,
                      patterns: tuple[str, ...]) -> None:
    which = p.add_mutually_exclusive_group(required=required)
    which.add_argument("--topic", metavar="NAME")
    which.add_argument("--group", metavar="NAME")
    which.add_argument("--transactional-id", metavar="ID")
    which.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", choices=patterns, default=patterns[0],
                   help=f"default {patterns[0]}")


def _filter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--principal", metavar="PRINCIPAL", help="only this principal")
    p.add_argument("--operation", type=_enum(AclOperation), metavar="OP",
                   help="only this operation")
    p.add_argument("--permission", type=_enum(AclPermissionType), metavar="allow|deny")
    p.add_argument("--host", metavar="HOST", help="only this host")


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, "kafka-cluster"
    return ResourceType.ANY, None


def _pattern(args: argparse.Namespace) -> PatternType:
    return PatternType[args.resource_pattern_type.upper()]


def _row(resource_type: int, name: str, pattern: int, principal: str, host: str,
         operation: int, permission: int) -> Row:
    return {"principal": principal, "host": host,
            "operation": AclOperation(operation).name.lower(),
            "permission": AclPermissionType(permission).name.lower(),
            "resource_type": ResourceType(resource_type).name.lower(),
            "resource_name": name, "pattern_type": PatternType(pattern).name.lower()}


def _render(rows: list[Row]) -> str:
    return table(["principal", "host", "operation", "permission", "resource-type",
                  "resource-name", "pattern-type"],
                 [[r["principal"], r["host"], r["operation"], r["permission"],
                   r["resource_type"], r["resource_name"], r["pattern_type"]] for r in rows])


def _filter_fields(args: argparse.Namespace) -> dict[str, Any]:
    kind, name = _resource(args)
    return {"resource_type_filter": int(kind), "resource_name_filter": name,
            "pattern_type_filter": int(_pattern(args)), "principal_filter": args.principal,
            "host_filter": args.host,
            "operation": int(args.operation if args.operation is not None else AclOperation.ANY),
            "permission_type": int(args.permission if args.permission is not None
                                   else AclPermissionType.ANY)}


def list_acls(cluster: Cluster, args: argparse.Namespace) -> int:
    response = cluster.any().ask(ApiKey.DESCRIBE_ACLS,
                                  DescribeAclsRequest(**_filter_fields(args)), ceiling=3)
    if response.error_code:
        raise kafka_error("listing ACLs", response.error_code, response.error_message)
    rows = [_row(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                 a.operation, a.permission_type)
            for r in response.resources for a in r.acls]
    rows.sort(key=lambda r: (r["resource_type"], r["resource_name"], r["principal"],
                             r["operation"], r["permission"]))
    emit(args.json, rows, _render)
    return 0


def create_acls(cluster: Cluster, args: argparse.Namespace) -> int:
    grants = [(p, AclPermissionType.ALLOW) for p in args.allow_principal] + \
             [(p, AclPermissionType.DENY) for p in args.deny_principal]
    if not grants:
        raise CliError("give --allow-principal or --deny-principal", exit_code=2)
    kind, name = _resource(args)
    assert name is not None
    creations = [CreateAclsRequest.AclCreation(
        resource_type=int(kind), resource_name=name, resource_pattern_type=int(_pattern(args)),
        principal=principal, host=args.host, operation=int(op), permission_type=int(permission))
        for principal, permission in grants for op in args.operation]
    response = cluster.any().ask(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=creations),
                                  ceiling=3)
    rows = []
    for creation, result in zip(creations, response.results, strict=True):
        row = _row(creation.resource_type, creation.resource_name,
                   creation.resource_pattern_type, creation.principal, creation.host,
                   creation.operation, creation.permission_type)
        row["error"] = (error_name(result.error_code) + (
            f" ({result.error_message})" if result.error_message else "")
            if result.error_code else None)
        rows.append(row)
        if row["error"]:
            print(f"logserver: create ACL for {creation.principal}: {row['error']}",
                  file=sys.stderr)
    emit(args.json, rows, _render)
    return 1 if any(r["error"] for r in rows) else 0


def delete_acls(cluster: Cluster, args: argparse.Namespace) -> int:
    request = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        **_filter_fields(args))])
    response = cluster.any().ask(ApiKey.DELETE_ACLS, request, ceiling=3)
    (result,) = response.filter_results
    if result.error_code:
        raise kafka_error("deleting ACLs", result.error_code, result.error_message)
    rows = [_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                 m.operation, m.permission_type) for m in result.matching_acls]
    emit(args.json, rows, _render)
    return 0
