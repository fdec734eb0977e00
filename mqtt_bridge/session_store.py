"""Durable state of persistent MQTT sessions, kept in the log itself.

A session's state is its subscriptions and, per downlink partition, the offset from
which it must resume (everything before it was acknowledged by the device or was not
for it). Two stores, both in Kafka so a restarted bridge (or another bridge in front
of the same cluster) finds them:

- ``GroupOffsetStore``: committed offsets of a per-device group
  (``<prefix><client id>``) via OffsetCommit/OffsetFetch with generation -1, the
  simple-consumer commit Kafka accepts without a group join; the subscriptions ride
  in the commit metadata string.
- ``TopicSessionStore``: a compacted-style topic (key = client id, value = JSON
  state, tombstone on clean start), read whole at start-up. Used when the broker
  does not advertise OffsetCommit/OffsetFetch (logserver before its group APIs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from kafkaproto import ApiKey
from kafkaproto.messages import (
    OffsetCommitRequest,
    OffsetFetchRequest,
)

from .kafka_client import KafkaClient, KafkaError, TopicPartition
from .kafka_fetcher import EARLIEST, LATEST, Fetcher
from .kafka_producer import Producer

log = logging.getLogger(__name__)


@dataclass
class StoredSession:
    subscriptions: dict[str, int] = field(default_factory=dict)  # filter -> packed options
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    expires_at: float | None = None  # wall clock; None = never

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "v": 1,
                "subs": self.subscriptions,
                "offsets": [[t, p, o] for (t, p), o in self.offsets.items()],
                "expires_at": self.expires_at,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> StoredSession:
        d = json.loads(raw)
        return cls(
            {k: int(v) for k, v in d.get("subs", {}).items()},
            {(t, int(p)): int(o) for t, p, o in d.get("offsets", [])},
            d.get("expires_at"),
        )

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.time() > self.expires_at


class SessionStore(Protocol):
    name: str

    async def start(self) -> None: ...
    async def load(self, client_id: str) -> StoredSession | None: ...
    async def save(self, client_id: str, state: StoredSession) -> None: ...
    async def delete(self, client_id: str) -> None: ...


class TopicSessionStore:
    """Sessions as records of one topic, newest record per client id wins."""

    name = "topic"

    def __init__(self, client: KafkaClient, producer: Producer, topic: str) -> None:
        self.client = client
        self.producer = producer
        self.topic = topic
        self.sessions: dict[str, StoredSession] = {}

    async def start(self) -> None:
        meta = await self.client.partitions(self.topic, auto_create=True)
        tps = [(self.topic, p) for p in meta.partitions]
        start = await self.client.list_offsets(tps, EARLIEST)
        end = await self.client.list_offsets(tps, LATEST)
        reader = Fetcher(self.client, [self.topic], lambda tp, recs: None)
        n = 0
        for tp in tps:
            async for _nxt, records in reader.fetch_range(tp, start[tp], end[tp]):
                for r in records:
                    if r.key is None:
                        continue
                    cid = r.key.decode("utf-8", "replace")
                    n += 1
                    if r.value is None:
                        self.sessions.pop(cid, None)
                        continue
                    try:
                        self.sessions[cid] = StoredSession.from_json(r.value)
                    except (ValueError, TypeError) as exc:
                        log.warning("unreadable session record for %r: %s", cid, exc)
        log.info(
            "session store %s: %d records, %d persistent sessions", self.topic, n, len(self.sessions)
        )

    async def load(self, client_id: str) -> StoredSession | None:
        s = self.sessions.get(client_id)
        if s is not None and s.expired:
            await self.delete(client_id)
            return None
        return s

    async def save(self, client_id: str, state: StoredSession) -> None:
        self.sessions[client_id] = state
        await self.producer.send(self.topic, client_id.encode(), state.to_json())

    async def delete(self, client_id: str) -> None:
        if self.sessions.pop(client_id, None) is not None:
            await self.producer.send(self.topic, client_id.encode(), None)


class GroupOffsetStore:
    """Committed offsets of one group per device (OffsetCommit/OffsetFetch, generation -1)."""

    name = "group"

    def __init__(self, client: KafkaClient, prefix: str, anchor: TopicPartition) -> None:
        self.client = client
        self.prefix = prefix
        #: a partition every session commits, so the metadata (subscriptions) has a home
        self.anchor = anchor

    async def start(self) -> None:
        return None

    async def _conn(self, group: str):  # noqa: ANN202 - a BrokerConnection
        node = await self.client.coordinator(group)
        return await self.client.connection(node, "coordinator")

    async def load(self, client_id: str) -> StoredSession | None:
        """The state is the JSON in the anchor partition's commit metadata."""
        group = self.prefix + client_id
        conn = await self._conn(group)
        version = conn.version(ApiKey.OFFSET_FETCH, 7)
        resp = await conn.request(
            ApiKey.OFFSET_FETCH, version, OffsetFetchRequest(group_id=group, topics=None)
        )
        if resp.error_code:
            raise KafkaError(f"OffsetFetch {group}: error {resp.error_code}", resp.error_code)
        for t in resp.topics:
            for p in t.partitions:
                if (t.name, p.partition_index) == self.anchor and p.metadata:
                    state = StoredSession.from_json(p.metadata)
                    return None if state.expired else state
        return None

    async def save(self, client_id: str, state: StoredSession) -> None:
        await self._commit(client_id, state, state.to_json().decode())

    async def delete(self, client_id: str) -> None:
        await self._commit(client_id, StoredSession(), "")

    async def _commit(self, client_id: str, state: StoredSession, metadata: str) -> None:
        group = self.prefix + client_id
        offsets = dict(state.offsets)
        offsets.setdefault(self.anchor, 0)  # informative only: the metadata is the state
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p,
                    committed_offset=o,
                    committed_leader_epoch=-1,
                    commit_timestamp=-1,
                    committed_metadata=metadata if (t, p) == self.anchor else "",
                )
            )
        conn = await self._conn(group)
        version = conn.version(ApiKey.OFFSET_COMMIT, 7)
        resp = await conn.request(
            ApiKey.OFFSET_COMMIT,
            version,
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            ),
        )
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(
                        f"OffsetCommit {group} {t.name}-{p.partition_index}: error {p.error_code}",
                        p.error_code,
                    )


async def choose_store(
    kind: str,
    client: KafkaClient,
    producer: Producer,
    *,
    topic: str,
    group_prefix: str,
    anchor: TopicPartition,
) -> SessionStore:
    """``auto`` picks the group store when the broker advertises OffsetCommit and OffsetFetch."""
    if kind == "auto":
        while True:
            try:
                ok = await client.supports(ApiKey.OFFSET_COMMIT) and await client.supports(
                    ApiKey.OFFSET_FETCH
                ) and await client.supports(ApiKey.FIND_COORDINATOR)
                break
            except KafkaError as exc:
                log.warning("cannot reach the log to pick a session store (%s); retrying", exc)
                await asyncio.sleep(1.0)
        kind = "group" if ok else "topic"
        if not ok:
            log.warning(
                "broker does not advertise OffsetCommit/OffsetFetch: persistent sessions are "
                "stored in topic %s instead of committed group offsets",
                topic,
            )
    store: SessionStore
    if kind == "group":
        store = GroupOffsetStore(client, group_prefix, anchor)
    elif kind == "topic":
        store = TopicSessionStore(client, producer, topic)
    else:
        raise ValueError(f"unknown session store {kind!r}")
    await store.start()
    log.info("persistent sessions stored with the %s store", store.name)
    return store
