"""REST Proxy consumer instances: /consumers/{group}/instances/{name}/...

An instance remembers its format, subscription or manual assignment and positions. A
subscribed instance is a member of its Kafka consumer group (logserver.rest.membership):
it reads the partitions the group's range assignment gives it, shared with Kafka consumers
of the same group. Positions start at the group's committed offset (OffsetFetch), else
``auto.offset.reset`` (ListOffsets); commits are OffsetCommit of that member (or of a
standalone consumer, generation -1, for a manual assignment). Idle instances are deleted
after ``consumer.instance.timeout.ms`` and leave their group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kafkaproto import ErrorCode
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.rest import kafka_calls
from logserver.rest.errors import (
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_INSTANCE_NOT_FOUND,
    PARTITION_NOT_FOUND,
    TOPIC_NOT_FOUND,
    UNPROCESSABLE,
    RestError,
    from_kafka,
)
from logserver.rest.formats import BINARY, JSON, check_plain, response_type
from logserver.rest.membership import GroupMember
from logserver.rest.reading import READ_COMMITTED, READ_UNCOMMITTED
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class Instance:
    group: str
    name: str
    format: str = BINARY
    reset: str = "latest"
    auto_commit: bool = True
    committed: bool = False  # isolation.level read_committed
    topics: list[str] = field(default_factory=list)
    pattern: re.Pattern[str] | None = None
    assigned: list[TopicPartition] = field(default_factory=list)
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)
    member: GroupMember | None = None

    def subscribed(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.topics


class Consumers:
    """Every consumer instance of the proxy."""

    def __init__(self, broker: WithCluster, timeout_ms: int) -> None:
        self.broker = broker
        self.timeout_s = timeout_ms / 1000
        self.instances: dict[tuple[str, str], Instance] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._anonymous = 0

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for instance in list(self.instances.values()):  # the others take their partitions
            await self.remove(instance)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(self.timeout_s / 4, 5.0))
            now = time.monotonic()
            for key, instance in list(self.instances.items()):
                if now - instance.used > self.timeout_s:
                    log.info("REST consumer %s/%s expired (idle %.0f s)", key[0], key[1],
                             now - instance.used)
                    await self.remove(instance)

    async def remove(self, instance: Instance) -> None:
        """Forget the instance; it leaves its group."""
        self.instances.pop((instance.group, instance.name), None)
        await self.leave(instance)

    async def leave(self, instance: Instance) -> None:
        member, instance.member = instance.member, None
        if member is not None:
            await member.stop()

    def join(self, instance: Instance) -> None:
        """Subscribed: take part in the group's assignment (a new subscription rejoins)."""
        if instance.member is not None:
            instance.member.resubscribe()
            return
        instance.member = GroupMember(self.broker, instance.group, instance.name,
                                      lambda: self.subscribed_topics(instance),
                                      instance.positions.clear)
        instance.member.start()

    def subscribed_topics(self, instance: Instance) -> list[str]:
        if instance.pattern is None:
            return list(instance.topics)
        return sorted(t for t in self.broker.topics.topic_names()
                      if t not in INTERNAL_TOPICS and instance.subscribed(t))

    # -- instances -------------------------------------------------------------------------

    def create(self, group: str, body: Any) -> Instance:
        body = body or {}
        if not isinstance(body, dict):
            raise RestError(422, UNPROCESSABLE, "the body must be an object")
        name = body.get("name")
        if name is None:
            self._anonymous += 1
            name = f"rest-consumer-{self._anonymous}-{int(time.time() * 1000)}"
        fmt = str(body.get("format", BINARY)).lower()
        reset = str(body.get("auto.offset.reset", "latest")).lower()
        commit = str(body.get("auto.commit.enable", "true")).lower()
        isolation = str(body.get("isolation.level", READ_UNCOMMITTED)).lower()
        if not isinstance(name, str) or not name:
            raise RestError(422, UNPROCESSABLE, "name must be a non-empty string")
        if fmt not in (BINARY, JSON):
            raise RestError(422, UNPROCESSABLE, f"format {fmt} is not supported (binary, json)")
        if reset not in ("earliest", "latest"):
            raise RestError(422, UNPROCESSABLE, "auto.offset.reset must be earliest or latest")
        if commit not in ("true", "false"):
            raise RestError(422, UNPROCESSABLE, "auto.commit.enable must be true or false")
        if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise RestError(422, UNPROCESSABLE,
                            "isolation.level must be read_uncommitted or read_committed")
        if checks_group_denied(self.broker, group):
            raise from_kafka(ErrorCode.GROUP_AUTHORIZATION_FAILED, f"group {group}")
        if (group, name) in self.instances:
            raise RestError(409, CONSUMER_ALREADY_EXISTS,
                            f"Consumer with specified consumer ID {name} already exists in group {group}.")
        instance = Instance(group, name, fmt, reset, commit == "true",
                            committed=isolation == READ_COMMITTED)
        self.instances[(group, name)] = instance
        return instance

    def get(self, group: str, name: str) -> Instance:
        instance = self.instances.get((group, name))
        if instance is None:
            raise RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")
        instance.used = time.monotonic()
        return instance

    def owned(self, instance: Instance) -> list[TopicPartition]:
        """The partitions this instance reads now: its manual assignment, else what the
        group assigned it (nothing between generations)."""
        if instance.assigned:
            return list(instance.assigned)
        if instance.member is not None and instance.member.assignment is not None:
            return list(instance.member.assignment)
        return []

    # -- positions -------------------------------------------------------------------------

    async def position(self, instance: Instance, tps: list[TopicPartition]) -> None:
        """Fill in the positions not known yet: committed offsets, else the reset policy."""
        missing = [tp for tp in tps if tp not in instance.positions]
        if not missing:
            return
        error, committed = await kafka_calls.fetch_offsets(self.broker, instance.group, missing)
        if error:
            raise from_kafka(error, f"group {instance.group}")
        need_reset: dict[str, list[int]] = {}
        for tp in missing:
            part_error, offset, _meta = committed.get(tp, (0, -1, ""))
            if part_error:
                raise from_kafka(part_error, f"{tp[0]}-{tp[1]}")
            start = self.broker.storage.log_start_offset(*tp) or 0
            if offset >= start:
                instance.positions[tp] = offset
            else:
                need_reset.setdefault(tp[0], []).append(tp[1])
        await self.seek(instance, need_reset, instance.reset == "earliest")

    async def seek(self, instance: Instance, partitions: dict[str, list[int]], beginning: bool) -> None:
        for topic, indexes in partitions.items():
            found = await kafka_calls.list_offsets(
                self.broker, topic, indexes,
                kafka_calls.EARLIEST if beginning else kafka_calls.LATEST, instance.committed)
            for partition, (error, offset) in found.items():
                if error:
                    raise from_kafka(error, f"{topic}-{partition}")
                instance.positions[(topic, partition)] = offset

    async def commit(self, instance: Instance, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        generation, member_id = -1, ""
        if instance.member is not None:
            generation, member_id = instance.member.generation, instance.member.member_id
        errors = await kafka_calls.commit_offsets(self.broker, instance.group, offsets,
                                                  generation, member_id)
        for tp, error in errors.items():
            if error:
                raise from_kafka(error, f"offsets of {tp[0]}-{tp[1]} in group {instance.group}")


def checks_group_denied(broker: WithCluster, group: str) -> bool:
    """READ on the group, as JoinGroup needs."""
    return bool(checks.denied(broker, checks.JOIN_GROUP, group))


def _partitions(broker: WithCluster, body: Any, key: str = "partitions",
                with_offset: bool = False) -> list[tuple[str, int, int]]:
    """``{key: [{"topic", "partition"[, "offset"]}]}`` checked against the topics."""
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise RestError(422, UNPROCESSABLE, f"the body must be an object with a {key} list")
    found = []
    for i, item in enumerate(body[key]):
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str) \
                or not isinstance(item.get("partition"), int):
            raise RestError(422, UNPROCESSABLE, f"{key}[{i}] needs topic and partition")
        offset = item.get("offset", 0)
        if with_offset and (not isinstance(offset, int) or offset < 0):
            raise RestError(422, UNPROCESSABLE, f"{key}[{i}] needs a non-negative offset")
        count = broker.topics.partition_count(item["topic"])
        if count is None:
            raise RestError(404, TOPIC_NOT_FOUND, f"Topic {item['topic']} not found.")
        if not 0 <= item["partition"] < count:
            raise RestError(404, PARTITION_NOT_FOUND, f"Partition {item['partition']} not found.")
        found.append((item["topic"], item["partition"], offset))
    return found


def add_consumer_routes(app: web.Application, consumers: Consumers) -> None:
    from logserver.rest.http_io import read_json, read_waiting, record_view, reply

    broker = consumers.broker
    base = "/consumers/{group}/instances/{name}"

    async def body_of(request: web.Request) -> Any:
        check_plain(request.headers.get("Content-Type", ""), request.can_read_body)
        return await read_json(request)

    def instance_of(request: web.Request) -> Instance:
        return consumers.get(request.match_info["group"], request.match_info["name"])

    async def create(request: web.Request) -> web.Response:
        group = request.match_info["group"]
        instance = consumers.create(group, await body_of(request))
        return reply({"instance_id": instance.name,
                      "base_uri": f"{request.url.origin()}/consumers/{group}/instances/{instance.name}"})

    async def delete(request: web.Request) -> web.Response:
        await consumers.remove(instance_of(request))
        return web.Response(status=204)

    async def subscribe(request: web.Request) -> web.Response:
        instance = instance_of(request)
        body = await body_of(request)
        if isinstance(body, dict) and isinstance(body.get("topic_pattern"), str):
            try:
                instance.pattern = re.compile(body["topic_pattern"])
            except re.error as exc:
                raise RestError(422, UNPROCESSABLE, f"bad topic_pattern: {exc}") from None
            instance.topics = []
        elif isinstance(body, dict) and isinstance(body.get("topics"), list) \
                and all(isinstance(t, str) for t in body["topics"]):
            instance.topics, instance.pattern = list(body["topics"]), None
        else:
            raise RestError(422, UNPROCESSABLE, "the body must name topics or a topic_pattern")
        instance.assigned = []
        consumers.join(instance)
        return web.Response(status=204)

    async def subscription(request: web.Request) -> web.Response:
        instance = instance_of(request)
        return reply({"topics": consumers.subscribed_topics(instance)})

    async def unsubscribe(request: web.Request) -> web.Response:
        instance = instance_of(request)
        instance.topics, instance.pattern = [], None
        await consumers.leave(instance)
        return web.Response(status=204)

    async def assign(request: web.Request) -> web.Response:
        instance = instance_of(request)
        found = _partitions(broker, await body_of(request))
        await consumers.leave(instance)
        instance.assigned = [(t, p) for t, p, _ in found]
        instance.topics, instance.pattern = [], None
        return web.Response(status=204)

    async def assignments(request: web.Request) -> web.Response:
        instance = instance_of(request)
        return reply({"partitions": [{"topic": t, "partition": p}
                                     for t, p in consumers.owned(instance)]})

    async def seek(request: web.Request) -> web.Response:
        instance = instance_of(request)
        for topic, partition, offset in _partitions(broker, await body_of(request), "offsets",
                                                    with_offset=True):
            instance.positions[(topic, partition)] = offset
        return web.Response(status=204)

    def seek_to(beginning: bool) -> Any:
        async def handle(request: web.Request) -> web.Response:
            instance = instance_of(request)
            by_topic: dict[str, list[int]] = {}
            for topic, partition, _ in _partitions(broker, await body_of(request)):
                by_topic.setdefault(topic, []).append(partition)
            await consumers.seek(instance, by_topic, beginning)
            return web.Response(status=204)
        return handle

    async def records(request: web.Request) -> web.Response:
        from logserver.rest.http_io import MAX_WAIT_MS, int_param

        instance = instance_of(request)
        timeout_ms = min(max(int_param(request, "timeout", 1000), 0), MAX_WAIT_MS)
        max_bytes = max(int_param(request, "max_bytes", 1_048_576), 1)
        started = asyncio.get_running_loop().time()
        member = instance.member
        if member is not None:
            if member.error:
                raise from_kafka(member.error, f"group {instance.group}")
            if member.assignment is None:  # joining or rebalancing: wait for the assignment
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(member.assigned.wait(), timeout_ms / 1000)
            spent = int((asyncio.get_running_loop().time() - started) * 1000)
            timeout_ms = max(timeout_ms - spent, 0)
        owned = consumers.owned(instance)
        for topic in {t for t, _ in owned}:
            error = kafka_calls.read_error(broker, topic, 0)
            if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                raise from_kafka(error, f"topic {topic}")
        await consumers.position(instance, owned)
        found = await read_waiting(broker, owned, instance.positions, max_bytes, timeout_ms,
                                   instance.committed)
        body = []
        for (topic, partition), got in found.items():
            body += [record_view(topic, partition, r, instance.format) for r in got]
            instance.positions[(topic, partition)] = got[-1].offset + 1
        if instance.auto_commit and found:
            try:  # as Kafka's auto-commit: a failed commit is logged, the records returned
                await consumers.commit(instance, {tp: instance.positions[tp] for tp in found})
            except RestError as exc:
                log.warning("REST consumer %s/%s: auto-commit failed: %s", instance.group,
                            instance.name, exc.message)
        instance.used = time.monotonic()
        return reply(body, content_type=response_type(instance.format))

    async def commit(request: web.Request) -> web.Response:
        instance = instance_of(request)
        body = await body_of(request)
        if body is None or (isinstance(body, dict) and not body.get("offsets")):
            offsets = dict(instance.positions)  # Confluent: everything consumed so far
        else:
            offsets = {(t, p): o for t, p, o in _partitions(broker, body, "offsets", with_offset=True)}
        await consumers.commit(instance, offsets)
        return web.Response(status=204)

    async def committed(request: web.Request) -> web.Response:
        instance = instance_of(request)
        wanted = [(t, p) for t, p, _ in _partitions(broker, await body_of(request))]
        error, found = await kafka_calls.fetch_offsets(broker, instance.group, wanted)
        if error:
            raise from_kafka(error, f"group {instance.group}")
        return reply({"offsets": [
            {"topic": t, "partition": p, "offset": found.get((t, p), (0, -1, ""))[1],
             "metadata": found.get((t, p), (0, -1, ""))[2]} for t, p in wanted]})

    app.router.add_post("/consumers/{group}", create)
    app.router.add_delete(base, delete)
    app.router.add_post(base + "/subscription", subscribe)
    app.router.add_get(base + "/subscription", subscription)
    app.router.add_delete(base + "/subscription", unsubscribe)
    app.router.add_post(base + "/assignments", assign)
    app.router.add_get(base + "/assignments", assignments)
    app.router.add_post(base + "/positions", seek)
    app.router.add_post(base + "/positions/beginning", seek_to(True))
    app.router.add_post(base + "/positions/end", seek_to(False))
    app.router.add_get(base + "/records", records)
    app.router.add_post(base + "/offsets", commit)
    app.router.add_get(base + "/offsets", committed)
