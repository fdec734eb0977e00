"""``logserver group list|describe|reset-offsets|delete``, as kafka-consumer-groups does them.

ListGroups, FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit and
DeleteGroups. ``describe`` shows, per partition, the committed offset, the log end
offset and their difference (the lag), and who is assigned the partition.
``reset-offsets`` only shows its plan unless given ``--execute``, and refuses a group
that still has members (they would overwrite the new offsets at their next commit).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

from .client import BrokerLink, Cluster
from .consumer_protocol import decode_assignment
from .errors import CliError, error_name, kafka_error
from .offsets import EARLIEST, LATEST, TopicPartition, leaders_of, list_offsets
from .output import emit, key_values, table

INACTIVE_STATES = ("Empty", "Dead")


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser("group", help="consumer groups: members, offsets, lag",
                                description="Consumer groups: list, describe (with lag), "
                                "reset-offsets, delete.")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("list", parents=[common], help="every group, with its state",
                       description="List the consumer groups of every broker.")
    p.set_defaults(func=list_groups)

    p = sub.add_parser("describe", parents=[common], help="offsets, lag and members",
                       description="Per partition: committed offset, log end offset, lag and "
                       "the member assigned to it; then the members.")
    p.add_argument("groups", nargs="*", metavar="GROUP")
    p.add_argument("--all-groups", action="store_true", help="every group of every broker")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true",
                      help="only the members: id, host, client id, partition count")
    view.add_argument("--state", action="store_true",
                      help="only the state: coordinator, assignment strategy, state, members")
    p.set_defaults(func=describe_groups)

    p = sub.add_parser(
        "reset-offsets", parents=[common], help="move a group's committed offsets",
        description="Move the committed offsets of a group that has no active member. "
        "Shows the plan (--dry-run, the default) unless given --execute.")
    p.add_argument("group", metavar="GROUP")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="to the log end offset")
    to.add_argument("--to-offset", type=int, metavar="OFFSET",
                    help="to this offset (kept within the log)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS[.sss][+HH:MM]",
                    help="to the first record at or after this time (local time if no zone)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="by N from the committed offset (negative: back)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(func=reset_offsets)

    p = sub.add_parser("delete", parents=[common], help="delete groups and their offsets",
                       description="Delete groups that have no active member.")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(func=delete_groups)


# ---- list -----------------------------------------------------------------------------
def list_groups(cluster: Cluster, args: argparse.Namespace) -> int:
    rows = _listed(cluster)
    emit(args.json, rows, lambda rows: table(
        ["group", "state", "protocol-type", "coordinator"],
        [[r["group"], r["state"], r["protocol_type"] or None, r["coordinator"]] for r in rows]))
    return 0


def _listed(cluster: Cluster) -> list[dict[str, Any]]:
    """Every group of every broker (ListGroups), by name."""
    cluster.metadata([])
    rows: list[dict[str, Any]] = []
    for node in sorted(cluster.brokers):
        link = cluster.node(node)
        response = link.ask(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[]), ceiling=4)
        if response.error_code:
            raise kafka_error(f"listing the groups of broker {node}", response.error_code)
        state_known = link.version(ApiKey.LIST_GROUPS, 4) >= 4
        rows += [{"group": g.group_id, "state": g.group_state if state_known else None,
                  "protocol_type": g.protocol_type, "coordinator": node}
                 for g in response.groups]
    rows.sort(key=lambda r: r["group"])
    return rows


# ---- describe -------------------------------------------------------------------------
def describe_group(link: BrokerLink, group: str) -> Any:
    response = link.ask(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
        groups=[group], include_authorized_operations=False), ceiling=5)
    (described,) = response.groups
    if described.error_code:
        raise kafka_error(f"group {group!r}", described.error_code)
    return described


def committed_offsets(link: BrokerLink, group: str) -> dict[TopicPartition, int]:
    """Every offset ``group`` has committed (OffsetFetch for all topics, v2+)."""
    version = link.version(ApiKey.OFFSET_FETCH, 8)
    if version < 2:
        raise CliError(f"the server at {link.address} only speaks OffsetFetch v{version}; "
                       f"listing all of a group's offsets needs v2")
    request = OffsetFetchRequest(group_id=group, topics=None, require_stable=False, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)])
    response = link.request(ApiKey.OFFSET_FETCH, version, request)
    if version >= 8:
        (answer,) = response.groups
        code, topics = answer.error_code, answer.topics
    else:
        code, topics = response.error_code, response.topics
    if code:
        raise kafka_error(f"offsets of group {group!r}", code)
    out: dict[TopicPartition, int] = {}
    for t in topics:
        for p in t.partitions:
            if p.error_code:
                raise kafka_error(f"offset of group {group!r} for {t.name}-{p.partition_index}",
                                  p.error_code)
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def _log_end_offsets(cluster: Cluster, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
    """Log end offsets of the partitions that still exist (a deleted topic has none)."""
    leaders: dict[TopicPartition, int] = {}
    for topic in sorted({t for t, _ in tps}):
        try:
            partitions = cluster.topic_partitions(topic)
        except CliError:
            continue
        leaders.update({(topic, p): leader for p, leader in partitions.items()
                        if (topic, p) in tps})
    return list_offsets(cluster, leaders, LATEST) if leaders else {}


def _describe(cluster: Cluster, group: str) -> dict[str, Any]:
    link = cluster.coordinator(group)
    described = describe_group(link, group)
    committed = committed_offsets(link, group)
    if described.group_state == "Dead" and not committed:
        raise CliError(f"unknown group {group!r} (no members, no committed offsets)")
    owner: dict[TopicPartition, Any] = {}
    members: list[dict[str, Any]] = []
    for m in described.members:
        try:
            assignment = decode_assignment(bytes(m.member_assignment)) \
                if described.protocol_type == "consumer" else {}
        except ValueError:
            assignment = {}
        for topic, assigned in assignment.items():
            for p in assigned:
                owner[(topic, p)] = m
        members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "host": m.client_host,
                        "assignment": {t: sorted(ps) for t, ps in sorted(assignment.items())}})
    tps = set(committed) | set(owner)
    end = _log_end_offsets(cluster, tps)
    partitions: list[dict[str, Any]] = []
    for tp in sorted(tps):
        current, log_end = committed.get(tp), end.get(tp)
        m = owner.get(tp)
        partitions.append({
            "topic": tp[0], "partition": tp[1], "current_offset": current,
            "log_end_offset": log_end,
            "lag": log_end - current if current is not None and log_end is not None else None,
            "member_id": m.member_id if m else None, "host": m.client_host if m else None,
            "client_id": m.client_id if m else None})
    lags = [p["lag"] for p in partitions if p["lag"] is not None]
    return {"group": group, "coordinator": {"host": link.host, "port": link.port},
            "state": described.group_state, "protocol_type": described.protocol_type,
            "protocol": described.protocol_data, "members": members,
            "total_lag": sum(lags), "partitions": partitions}


def _render_group(d: dict[str, Any]) -> str:
    head = key_values([
        ("group", d["group"]), ("coordinator", f"{d['coordinator']['host']}:{d['coordinator']['port']}"),
        ("state", d["state"]), ("protocol-type", d["protocol_type"] or None),
        ("protocol", d["protocol"] or None), ("members", len(d["members"])),
        ("total-lag", d["total_lag"])])
    offsets = table(
        ["topic", "partition", "current-offset", "log-end-offset", "lag", "consumer-id", "host",
         "client-id"],
        [[p["topic"], p["partition"], p["current_offset"], p["log_end_offset"], p["lag"],
          p["member_id"], p["host"], p["client_id"]] for p in d["partitions"]])
    members = table(["member-id", "client-id", "host", "partitions"], [
        [m["member_id"], m["client_id"], m["host"],
         " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in m["assignment"].items()) or None]
        for m in d["members"]])
    if not d["members"]:  # the header says MEMBERS 0
        return f"{head}\n\n{offsets}"
    return f"{head}\n\n{offsets}\n\nMEMBERS\n=======\n{members}"


def describe_groups(cluster: Cluster, args: argparse.Namespace) -> int:
    if bool(args.groups) == args.all_groups:
        raise CliError("name the groups, or give --all-groups", exit_code=2)
    names = [r["group"] for r in _listed(cluster)] if args.all_groups else args.groups
    described = [_describe(cluster, g) for g in names]
    if args.members:  # kafka-consumer-groups --describe --members
        rows = [{"group": d["group"], "member_id": m["member_id"], "host": m["host"],
                 "client_id": m["client_id"],
                 "partitions": sum(len(ps) for ps in m["assignment"].values())}
                for d in described for m in d["members"]]
        emit(args.json, rows, lambda rows: table(
            ["group", "consumer-id", "host", "client-id", "#partitions"],
            [[r["group"], r["member_id"], r["host"], r["client_id"], r["partitions"]]
             for r in rows]))
        return 0
    if args.state:  # kafka-consumer-groups --describe --state
        rows = [{"group": d["group"],
                 "coordinator": f"{d['coordinator']['host']}:{d['coordinator']['port']}",
                 "assignment_strategy": d["protocol"] or None, "state": d["state"],
                 "members": len(d["members"])} for d in described]
        emit(args.json, rows, lambda rows: table(
            ["group", "coordinator", "assignment-strategy", "state", "#members"],
            [[r["group"], r["coordinator"], r["assignment_strategy"], r["state"],
              r["members"]] for r in rows]))
        return 0
    emit(args.json, described if len(described) != 1 else described[0],
         lambda _: "\n\n".join(_render_group(d) for d in described))
    return 0


# ---- reset-offsets --------------------------------------------------------------------
def _scope(cluster: Cluster, args: argparse.Namespace,
           committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The partitions to reset, with their leaders."""
    if args.all_topics:
        if not committed:
            raise CliError(f"group {args.group!r} has no committed offsets: name the topics "
                           f"with --topic")
        leaders = leaders_of(cluster, sorted({t for t, _ in committed}))
        return {tp: leader for tp, leader in leaders.items() if tp in committed}
    out: dict[TopicPartition, int] = {}
    for spec in args.topic:
        name, _, wanted = spec.partition(":")
        partitions = cluster.topic_partitions(name)
        if wanted:
            try:
                chosen = [int(p) for p in wanted.split(",") if p.strip()]
            except ValueError:
                raise CliError(f"--topic {spec!r}: partitions must be numbers", exit_code=2) from None
            missing = [p for p in chosen if p not in partitions]
            if missing:
                raise CliError(f"topic {name!r} has no partition {missing[0]} "
                               f"(it has {len(partitions)})")
        else:
            chosen = sorted(partitions)
        out.update({(name, p): partitions[p] for p in chosen})
    return out


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 time (Kafka's format; local time without a zone)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS[.sss][+HH:MM]",
                       exit_code=2) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def _plan(cluster: Cluster, args: argparse.Namespace, leaders: dict[TopicPartition, int],
          committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    earliest = list_offsets(cluster, leaders, EARLIEST)
    latest = list_offsets(cluster, leaders, LATEST)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in leaders}
    if args.to_datetime is not None:
        found = list_offsets(cluster, leaders, parse_datetime(args.to_datetime))
        return {tp: latest[tp] if offset < 0 else offset for tp, offset in found.items()}
    missing = sorted(tp for tp in leaders if tp not in committed)
    if missing:
        raise CliError(f"--shift-by: group {args.group!r} has no committed offset for "
                       f"{missing[0][0]}-{missing[0][1]} to shift from")
    return {tp: clamp(tp, committed[tp] + args.shift_by) for tp in leaders}


def reset_offsets(cluster: Cluster, args: argparse.Namespace) -> int:
    link = cluster.coordinator(args.group)
    described = describe_group(link, args.group)
    if described.group_state not in INACTIVE_STATES:
        raise CliError(f"group {args.group!r} is {described.group_state} with "
                       f"{len(described.members)} member(s): offsets can only be reset while "
                       f"the group is inactive (stop its consumers first)")
    committed = committed_offsets(link, args.group)
    leaders = _scope(cluster, args, committed)
    plan = _plan(cluster, args, leaders, committed)
    rows = [{"group": args.group, "topic": t, "partition": p,
             "current_offset": committed.get((t, p)), "new_offset": offset}
            for (t, p), offset in sorted(plan.items())]
    if args.execute:
        _commit(link, args.group, plan)
    emit(args.json, rows, lambda rows: table(
        ["group", "topic", "partition", "current-offset", "new-offset"],
        [[r["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]]
         for r in rows]))
    if not args.execute:
        print("logserver: dry run: nothing changed (add --execute to commit these offsets)",
              file=sys.stderr)
    return 0


def _commit(link: BrokerLink, group: str, offsets: dict[TopicPartition, int]) -> None:
    """OffsetCommit as an admin does: no generation, no member."""
    topics: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append((partition, offset))
    Partition = OffsetCommitRequest.OffsetCommitRequestPartition
    request = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            name=topic, partitions=[Partition(partition_index=p, committed_offset=o,
                                              committed_leader_epoch=-1, commit_timestamp=-1,
                                              committed_metadata="") for p, o in parts])
            for topic, parts in topics.items()])
    response = link.ask(ApiKey.OFFSET_COMMIT, request, ceiling=8)
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise kafka_error(f"committing group {group!r} offset for "
                                  f"{t.name}-{p.partition_index}", p.error_code)


# ---- delete ---------------------------------------------------------------------------
def delete_groups(cluster: Cluster, args: argparse.Namespace) -> int:
    results = []
    for group in args.groups:
        link = cluster.coordinator(group)
        response = link.ask(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group]),
                             ceiling=2)
        (result,) = response.results
        code = result.error_code
        results.append({"group": group, "status": error_name(code) if code else "OK",
                        "error": _delete_error(group, code) if code else None})
    emit(args.json, results, lambda rows: table(
        ["group", "status"], [[r["group"], r["status"]] for r in rows]))
    for r in results:
        if r["error"]:
            print(f"logserver: delete group {r['group']!r}: {r['error']}", file=sys.stderr)
    return 1 if any(r["error"] for r in results) else 0


def _delete_error(group: str, code: int) -> str:
    if code == ErrorCode.NON_EMPTY_GROUP:
        return "NON_EMPTY_GROUP (the group has active members: stop its consumers first)"
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return "GROUP_ID_NOT_FOUND (no such group)"
    return error_name(code)
