"""Compacted topics of the log as key -> value tables (sessions, retained messages).

A table is a topic with ``cleanup.policy=compact``: the newest record per key is the
value, a record with a null value (tombstone) deletes it. The bridge creates the topic
with CreateTopics (so the log compacts it as Kafka compacts ``__consumer_offsets``)
and reads it whole at start-up; writes go through the bridge's idempotent producer.
"""

from __future__ import annotations

import logging

from commonlib.kafkaclient import KafkaClient, KafkaError
from kafkaproto import ApiKey
from kafkaproto.messages import CreateTopicsRequest
from kafkaproto.records import Record

from .kafka_fetcher import EARLIEST, LATEST, Fetcher

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36


async def ensure_compacted_topic(
    client: KafkaClient, topic: str, partitions: int, max_message_bytes: int
) -> None:
    """Create ``topic`` compacted, unless it exists; brokers without CreateTopics auto-create."""
    conn = await client.connection(-1)
    if not conn.supports(ApiKey.CREATE_TOPICS):
        log.warning("broker has no CreateTopics: %s is auto-created, not compacted", topic)
        return
    req = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=topic,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=[],
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                    CreateTopicsRequest.CreatableTopicConfig(
                        name="max.message.bytes", value=str(max_message_bytes)
                    ),
                ],
            )
        ],
        timeout_ms=30_000,
    )
    resp = await conn.request(ApiKey.CREATE_TOPICS, conn.version(ApiKey.CREATE_TOPICS, 5), req)
    for t in resp.topics:
        if t.error_code not in (0, TOPIC_ALREADY_EXISTS):
            raise KafkaError(f"CreateTopics {topic}: error {t.error_code} {t.error_message}", t.error_code)
        if t.error_code == 0:
            log.info("created compacted topic %s (%d partitions)", topic, partitions)


async def read_records(client: KafkaClient, topic: str) -> dict[bytes, Record]:
    """Newest record per key of the whole topic (tombstones remove the key)."""
    meta = await client.partitions(topic, auto_create=True)
    tps = [(topic, p) for p in meta.partitions]
    start = await client.list_offsets(tps, EARLIEST)
    end = await client.list_offsets(tps, LATEST)
    reader = Fetcher(client, [topic], lambda tp, recs: None)
    table: dict[bytes, Record] = {}
    for tp in tps:
        async for _nxt, records in reader.fetch_range(tp, start[tp], end[tp]):
            for r in records:
                if r.key is None:
                    continue
                if r.value is None:
                    table.pop(r.key, None)
                else:
                    table[r.key] = r
    return table


async def read_table(client: KafkaClient, topic: str) -> dict[bytes, bytes]:
    """Newest value per key of the whole topic (tombstones remove the key)."""
    return {k: r.value for k, r in (await read_records(client, topic)).items() if r.value is not None}
