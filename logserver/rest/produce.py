"""POST /topics/{topic}[/partitions/{p}]: every record checked, then one Produce.

Nothing is written unless the whole request is valid: the body is parsed, every key and
value decoded, every partition checked and every batch sized before the Produce, which
appends one batch per partition. Keyed records go where Kafka's default partitioner puts
them (murmur2 of the key bytes), keyless ones round-robin over the partitions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkaproto import ErrorCode
from kafkaproto.murmur2 import partition_for
from kafkaproto.records import Header, build_batch
from logserver.rest import forward, kafka_calls
from logserver.rest.errors import (
    PARTITION_NOT_FOUND,
    TOO_LARGE,
    TOPIC_NOT_FOUND,
    UNPROCESSABLE,
    RestError,
    from_kafka,
    kafka_error_code,
    kafka_error_name,
)
from logserver.rest.formats import encode, parse_headers
from logserver.topic_config import TopicConfig

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster


@dataclass
class _Plan:
    """Where each record of the request goes: partition -> [(index in request, key, value)]."""

    partitions: dict[int, list[tuple[int, bytes | None, bytes | None, list[Header]]]] = field(
        default_factory=dict)
    count: int = 0


class Producer:
    """Produce requests of the proxy; keeps the round-robin position of keyless records."""

    def __init__(self, broker: WithCluster) -> None:
        self.broker = broker
        self._spread: dict[str, int] = {}

    async def produce(self, topic: str, fmt: str, body: Any,
                      partition: int | None = None) -> dict[str, Any]:
        count = self.broker.topics.partition_count(topic)
        if count is None:
            raise RestError(404, TOPIC_NOT_FOUND, f"Topic {topic} not found.")
        if partition is not None and not 0 <= partition < count:
            raise RestError(404, PARTITION_NOT_FOUND, f"Partition {partition} of topic {topic} not found.")
        plan = self._plan(topic, fmt, body, count, partition)
        batches = self._batches(topic, plan)
        answers = await kafka_calls.produce(self.broker, topic, batches)
        elsewhere = {a.index: batches[a.index] for a in answers
                     if a.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER}
        if elsewhere:  # cluster mode: led by another broker
            forwarded = await forward.to_leaders(self.broker, topic, elsewhere, 30_000)
            answers = [forwarded.get(a.index, a) for a in answers]
        offsets: list[dict[str, Any]] = [{}] * plan.count
        for answer in answers:
            if answer.error_code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
                raise from_kafka(answer.error_code, f"topic {topic}")
            if answer.error_code == ErrorCode.MESSAGE_TOO_LARGE:
                raise RestError(413, TOO_LARGE, f"records for {topic}-{answer.index} are larger "
                                "than the topic's max.message.bytes")
            for i, (index, *_record) in enumerate(plan.partitions[answer.index]):
                if answer.error_code:
                    offsets[index] = {"partition": answer.index, "offset": None,
                                      "error_code": kafka_error_code(answer.error_code),
                                      "error": _error_text(answer.error_code, answer.error_message)}
                else:
                    offsets[index] = {"partition": answer.index, "offset": answer.base_offset + i,
                                      "error_code": None, "error": None}
        return {"key_schema_id": None, "value_schema_id": None, "offsets": offsets}

    def _plan(self, topic: str, fmt: str, body: Any, count: int, fixed: int | None) -> _Plan:
        if not isinstance(body, dict) or not isinstance(body.get("records"), list):
            raise RestError(422, UNPROCESSABLE, "the body must be an object with a records list")
        records = body["records"]
        if not records:
            raise RestError(422, UNPROCESSABLE, "records must not be empty")
        plan = _Plan(count=len(records))
        for index, record in enumerate(records):
            if not isinstance(record, dict):
                raise RestError(422, UNPROCESSABLE, f"records[{index}] must be an object")
            key = encode(fmt, record.get("key"), f"records[{index}].key")
            value = encode(fmt, record.get("value"), f"records[{index}].value")
            headers = parse_headers(record.get("headers"), f"records[{index}].headers")
            partition = fixed if fixed is not None else record.get("partition")
            if partition is not None:
                if not isinstance(partition, int) or isinstance(partition, bool):
                    raise RestError(422, UNPROCESSABLE, f"records[{index}].partition must be an integer")
                if not 0 <= partition < count:
                    raise RestError(404, PARTITION_NOT_FOUND,
                                    f"Partition {partition} of topic {topic} not found.")
            elif key is not None:
                partition = partition_for(key, count)
            else:
                partition = self._next(topic, count)
            plan.partitions.setdefault(partition, []).append((index, key, value, headers))
        return plan

    def _next(self, topic: str, count: int) -> int:
        turn = self._spread.get(topic, 0)
        self._spread[topic] = turn + 1
        return turn % count

    def _batches(self, topic: str, plan: _Plan) -> dict[int, bytes]:
        config = self.broker.storage.topic_config(topic) or TopicConfig()
        now = int(time.time() * 1000)
        batches = {}
        for partition, records in plan.partitions.items():
            batch = build_batch([(key, value, headers, now) for _i, key, value, headers in records])
            if len(batch) > config.max_message_bytes:
                raise RestError(413, TOO_LARGE, f"{len(batch)} bytes of records for "
                                f"{topic}-{partition}: more than max.message.bytes "
                                f"{config.max_message_bytes}")
            batches[partition] = batch
        return batches


def _error_text(error: int, message: str | None) -> str:
    name = kafka_error_name(error)
    return f"{name}: {message}" if message else name
