"""Durable state of persistent MQTT sessions, kept in the log itself.

A session's state is its subscriptions and, per downlink partition, the offset from
which it must resume (everything before it was acknowledged by the device or was not
for it). Two stores, both in Kafka so a restarted bridge (or another bridge in front
of the same cluster) finds them:

- ``GroupOffsetStore``: committed offsets of a per-device group
  (``<prefix><client id>``) via OffsetCommit/OffsetFetch with generation -1, the
  simple-consumer commit Kafka accepts without a group join; the subscriptions ride
  in the commit metadata string.
- ``TopicSessionStore`` (the default): a compacted topic (key = client id, so any
  legal client id works; value = JSON state, tombstone when the session ends), read
  whole at start-up. A state is at most ``max_bytes`` (``--max-session-bytes``); the
  bridge refuses subscriptions that would make it larger, so every session within the
  limits can be saved.

The group store keeps its state in OffsetCommit metadata, which brokers cap (Kafka:
4,096 bytes) and its group id is ``prefix + client id`` (255 characters at most): it is
kept for deployments that already use it, and a session it cannot save is an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from commonlib.kafkaclient import Backoff, Failures, KafkaClient, KafkaError, TopicPartition
from kafkaproto import ApiKey
from kafkaproto.errors import ErrorCode
from kafkaproto.messages import (
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafkaproto.murmur2 import partition_for
from kafkaproto.records import Record

from .compacted import ensure_compacted_topic, read_records
from .kafka_producer import Producer
from .session_owners import Marker, SessionOwners, Verdict

log = logging.getLogger(__name__)


@dataclass
class StoredSession:
    subscriptions: dict[str, int] = field(default_factory=dict)  # filter -> packed options
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    expires_at: float | None = None  # wall clock; None = never
    expiry_interval: int = 0xFFFFFFFF  # seconds, applied from start-up when expires_at is None
    #: inbound QoS 2 packet ids not yet released: pid -> [nonce, topic, {partition: search start}]
    qos2_in: dict[int, list[Any]] = field(default_factory=dict)
    #: outbound unacknowledged PUBLISHes from the log: [pid, topic, partition, offset, qos, pubrel sent]
    inflight: list[list[Any]] = field(default_factory=list)
    #: the identity (user name; None: anonymous) the client id belongs to; only it may
    #: claim the session, across restarts and bridges. Unknown in records written before.
    owner: str | None = None
    owner_known: bool = False

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "v": 2,
            "subs": self.subscriptions,
            "offsets": [[t, p, o] for (t, p), o in self.offsets.items()],
            "expires_at": self.expires_at,
            "expiry": self.expiry_interval,
            "qos2_in": {str(k): v for k, v in self.qos2_in.items()},
            "inflight": self.inflight,
        }
        if self.owner_known:
            doc["owner"] = [self.owner]
        return json.dumps(doc, separators=(",", ":")).encode()

    def owned_by_another(self, username: str | None) -> bool:
        """Does this session belong to an identity other than ``username``?"""
        return self.owner_known and self.owner != username and not self.expired

    @classmethod
    def from_json(cls, raw: bytes | str) -> StoredSession:
        d = json.loads(raw)
        return cls(
            {k: int(v) for k, v in d.get("subs", {}).items()},
            {(t, int(p)): int(o) for t, p, o in d.get("offsets", [])},
            d.get("expires_at"),
            int(d.get("expiry", 0xFFFFFFFF)),
            {int(k): v for k, v in d.get("qos2_in", {}).items()},
            list(d.get("inflight", [])),
            d["owner"][0] if "owner" in d else None,
            "owner" in d,
        )

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.time() > self.expires_at


class SessionTooLarge(KafkaError):
    """A session's state exceeds the store's documented size limit (not retried)."""


#: Kafka errors a retry cannot fix: MESSAGE_TOO_LARGE, INVALID_TOPIC, RECORD_LIST_TOO_LARGE,
#: OFFSET_METADATA_TOO_LARGE, INVALID_GROUP_ID, INVALID_CONFIG
PERMANENT_ERRORS = frozenset({10, 17, 18, 12, 24, 40})


#: called when another bridge claims a session this one holds: (client id, nonce, claimant)
#: (client id, claim nonce, claiming bridge, clean start of the claiming connection)
TakenCallback = Callable[[str, str, str, bool], None]


class SessionStore(Protocol):
    name: str

    async def start(self) -> None: ...
    async def load(self, client_id: str) -> StoredSession | None: ...
    async def save(self, client_id: str, state: StoredSession, *, release: bool = False) -> None: ...
    async def delete(self, client_id: str, *, release: bool = False) -> None: ...
    async def claim(self, client_id: str, *, clean: bool = False) -> bool: ...
    def holds(self, client_id: str) -> bool: ...
    def stored(self, client_id: str) -> StoredSession | None: ...
    async def release(
        self, client_id: str, nonce: str, claimant: str, state: StoredSession | None
    ) -> None: ...


class Follower(Protocol):
    """Where the bridge's fetcher is in the topics it follows (kafka_fetcher.Fetcher)."""

    positions: dict[TopicPartition, int]

    def partitions_of(self, topic: str) -> list[TopicPartition]: ...


#: how long a claim may wait for its session partition (a leader failover takes seconds)
CATCH_UP_MIN_S = 10.0


class TopicSessionStore:
    """Sessions as records of one topic, newest record per client id wins.

    The bridge follows the topic (``on_records``), so several bridges in front of one log
    see each other's sessions; ``claim`` and ``release`` hand a session from one bridge
    to another (:mod:`.session_owners`).
    """

    name = "topic"

    def __init__(
        self, client: KafkaClient, producer: Producer, topic: str, max_bytes: int = 256 * 1024,
        partitions: int = 8, *, bridge_id: str = "", takeover_timeout_s: float = 3.0,
    ) -> None:
        self.client = client
        self.producer = producer
        self.topic = topic
        self.max_bytes = max_bytes
        self.partitions = partitions
        self.sessions: dict[str, StoredSession] = {}
        self.owners = SessionOwners(bridge_id or uuid.uuid4().hex)
        self.takeover_timeout_s = takeover_timeout_s
        self.on_taken: TakenCallback | None = None
        #: the fetcher that feeds ``on_records``; set, a claim first catches up with it
        self.follower: Follower | None = None
        self.takeover_timeouts = 0  # claims that waited in vain for the holder's release
        self._waiters: dict[str, asyncio.Future[None]] = {}  # claim nonce -> its release
        self._waiting: dict[str, str] = {}  # client id -> nonce of our claim awaiting release

    async def start(self) -> None:
        # room for one state plus the record and batch overhead
        await ensure_compacted_topic(self.client, self.topic, self.partitions, self.max_bytes + 65536)
        table = await read_records(self.client, self.topic)
        for record in sorted(table.values(), key=lambda r: r.offset):
            self._apply(record, at_start=True)
        now = time.time()
        expired = []
        for cid, state in self.sessions.items():
            if state.expires_at is None and state.expiry_interval != 0xFFFFFFFF:
                # saved while connected: the bridge stopped under it, the clock starts now
                state.expires_at = now + state.expiry_interval
            if state.expired and not self.owners.held_elsewhere(cid):
                expired.append(cid)
        for cid in expired:
            await self.delete(cid, release=True)
        log.info("session store %s: %d persistent sessions (%d expired removed)",
                 self.topic, len(self.sessions), len(expired))

    def on_records(self, records: list[Record]) -> None:
        """Records of the session topic as the bridge's fetcher follows it."""
        for record in records:
            self._apply(record)

    def _apply(self, record: Record, *, at_start: bool = False) -> None:
        if record.key is None:
            return
        cid = record.key.decode("utf-8", "replace")
        marker = Marker.of(record.headers)
        verdict = self.owners.observe(cid, marker, record.offset)
        if verdict is Verdict.TAKEN and not at_start:
            self._wake(self._waiting.get(cid))  # a newer claim beat ours: stop waiting
            if self.on_taken is not None and marker.claim is not None and marker.origin is not None:
                self.on_taken(cid, marker.claim, marker.origin, marker.clean)
            return
        if verdict is Verdict.IGNORE and not at_start:
            return
        if record.value is None:
            self.sessions.pop(cid, None)
        else:
            try:
                self.sessions[cid] = StoredSession.from_json(record.value)
            except (ValueError, TypeError, KeyError) as exc:
                log.error("unreadable session record for %r: %s", cid, exc)
        if marker.release is not None:
            self._wake(marker.release)

    def _wake(self, nonce: str | None) -> None:
        waiter = self._waiters.pop(nonce, None) if nonce is not None else None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def load(self, client_id: str) -> StoredSession | None:
        s = self.sessions.get(client_id)
        if s is not None and s.expired:
            await self.delete(client_id)
            return None
        return s

    async def save(self, client_id: str, state: StoredSession, *, release: bool = False) -> None:
        raw = state.to_json()
        if len(raw) > self.max_bytes:
            raise SessionTooLarge(
                f"session state of {len(raw)} bytes exceeds the limit of {self.max_bytes}", 10
            )
        self.sessions[client_id] = state
        marker = self.owners.save_marker(release="" if release else None)
        if release:
            self.owners.released(client_id, None)
        await self.producer.send(self.topic, client_id.encode(), raw, marker.headers())

    async def delete(self, client_id: str, *, release: bool = False) -> None:
        if self.sessions.pop(client_id, None) is not None or release:
            marker = self.owners.save_marker(release="" if release else None)
            if release:
                self.owners.released(client_id, None)
            await self.producer.send(self.topic, client_id.encode(), None, marker.headers())

    async def _catch_up(self, client_id: str) -> None:
        """Follow the client id's session partition up to its end before claiming.

        The claim record carries this bridge's view of the state and, as the newest record,
        replaces the holder's last save; a holder that died (kill -9) leaves nothing else.
        A fetcher still behind the holder's last save (a long-poll on a cluster's leader)
        would write a stale state, or a tombstone, over it. So when the partition's end
        cannot be read or reached within the catch-up bound (its leader failing over, say)
        the claim is not made: KafkaError (REQUEST_TIMED_OUT), and the CONNECT is refused
        with Server unavailable; the device connects again, as it would to any server.
        """
        follower = self.follower
        if follower is None:
            return
        tps = follower.partitions_of(self.topic)
        if not tps:
            return
        tp = (self.topic, partition_for(client_id.encode(), len(tps)))
        deadline = time.monotonic() + max(self.takeover_timeout_s, CATCH_UP_MIN_S)
        end: int | None = None
        failures = Failures(Backoff())  # retry.backoff.ms, retry.backoff.max.ms
        while end is None:
            try:
                end = (await self.client.list_offsets([tp], -1)).get(tp, -1)
            except KafkaError as exc:
                if time.monotonic() > deadline:
                    raise KafkaError(f"session partition {tp[0]}-{tp[1]} unavailable: {exc}",
                                     ErrorCode.REQUEST_TIMED_OUT) from exc
                await asyncio.sleep(failures.failed())
                try:  # the leader may have moved (failover): ask where it is now
                    await self.client.refresh_metadata([self.topic], auto_create=False)
                except KafkaError as meta_exc:
                    log.debug("metadata for %s: %s", self.topic, meta_exc)
        while follower.positions.get(tp, end) < end:
            if time.monotonic() > deadline:
                raise KafkaError(f"{tp[0]}-{tp[1]} not caught up to offset {end}",
                                 ErrorCode.REQUEST_TIMED_OUT)
            await asyncio.sleep(0.01)

    async def claim(self, client_id: str, *, clean: bool = False) -> bool:
        """Take the session over from whichever bridge holds it; False if a newer claim won.

        Waits for the holder's release (its final state) up to ``takeover_timeout_s``; a
        holder that is gone leaves its last saved state. A ``clean`` claim (clean start)
        is a tombstone: the old state ends with it.
        """
        if self.owners.holder(client_id) == self.owners.me:
            return True
        await self._catch_up(client_id)
        previous = self.owners.holder(client_id)
        nonce = uuid.uuid4().hex
        waiter: asyncio.Future[None] | None = None
        if previous is not None:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters[nonce] = waiter
        try:
            state = None if clean else self.sessions.get(client_id)
            offset = await self.producer.send(
                self.topic, client_id.encode(), state.to_json() if state is not None else None,
                self.owners.claim_marker(nonce, clean=clean).headers(),
            )
            if not self.owners.claimed(client_id, offset):
                return False
            if waiter is not None:
                # from here on any claim seen by another bridge is newer than ours
                self._waiting[client_id] = nonce
                try:
                    await asyncio.wait_for(asyncio.shield(waiter), self.takeover_timeout_s)
                except TimeoutError:
                    self.takeover_timeouts += 1
                    log.warning(
                        "bridge %s did not release session %s within %.1fs; resuming from its "
                        "last saved state", previous, client_id, self.takeover_timeout_s,
                        extra={"event": "takeover_timeout", "client_id": client_id},
                    )
            return self.holds(client_id)  # a newer claim may have won while we waited
        finally:
            self._waiters.pop(nonce, None)
            if self._waiting.get(client_id) == nonce:
                del self._waiting[client_id]

    def stored(self, client_id: str) -> StoredSession | None:
        """The session's last state in the topic as followed so far (no I/O)."""
        return self.sessions.get(client_id)

    def holds(self, client_id: str) -> bool:
        """Is this bridge the session's holder now (no newer claim seen)?"""
        return self.owners.holder(client_id) == self.owners.me

    async def release(
        self, client_id: str, nonce: str, claimant: str, state: StoredSession | None
    ) -> None:
        """Hand the session to ``claimant``: our final state (None: none) under its nonce."""
        self.owners.released(client_id, claimant)
        raw = state.to_json() if state is not None and len(state.to_json()) <= self.max_bytes else None
        if raw is None:
            self.sessions.pop(client_id, None)
        else:
            assert state is not None
            self.sessions[client_id] = state
        marker = self.owners.save_marker(release=nonce, to=claimant)
        await self.producer.send(self.topic, client_id.encode(), raw, marker.headers())


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

    async def _conn(self, group: str):  # noqa: ANN202 - a AsyncConnection
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

    async def save(self, client_id: str, state: StoredSession, *, release: bool = False) -> None:
        await self._commit(client_id, state, state.to_json().decode())

    async def delete(self, client_id: str, *, release: bool = False) -> None:
        await self._commit(client_id, StoredSession(), "")

    async def claim(self, client_id: str, *, clean: bool = False) -> bool:
        """One group per device has no owner to hand over from: several bridges share it."""
        return True

    def holds(self, client_id: str) -> bool:
        return True

    def stored(self, client_id: str) -> StoredSession | None:
        return None  # known only once loaded (OffsetFetch); the owner is checked then

    async def release(
        self, client_id: str, nonce: str, claimant: str, state: StoredSession | None
    ) -> None:
        return None

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
    max_bytes: int = 256 * 1024,
    bridge_id: str = "",
    takeover_timeout_s: float = 3.0,
) -> SessionStore:
    """``auto`` is the topic store: the only one that can hold every session within the limits."""
    if kind == "auto":
        kind = "topic"
    store: SessionStore
    if kind == "group":
        log.warning("group session store: states above the broker's offset metadata limit (Kafka "
                    "4,096 bytes) or client ids making a group id over 255 characters cannot be saved")
        store = GroupOffsetStore(client, group_prefix, anchor)
    elif kind == "topic":
        store = TopicSessionStore(client, producer, topic, max_bytes, bridge_id=bridge_id,
                                  takeover_timeout_s=takeover_timeout_s)
    else:
        raise ValueError(f"unknown session store {kind!r}")
    await store.start()
    log.info("persistent sessions stored with the %s store", store.name)
    return store
