"""One broker's part in the cluster: its registration, the controller (when elected),
and the leader and follower duties for the partitions it holds.

Everything is driven by the etcd watch: each event updates the ClusterModel, then
``_reconcile`` makes this broker's state match it (create local logs, lead or follow,
elect leaders when it is the controller). Decisions are written back only with
compare-and-swap transactions (logserver.cluster.etcd).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaproto import ErrorCode
from kafkaproto.client import Backoff, Failures
from logserver.cluster import reassignment
from logserver.cluster.broker_configs import ClusterBrokerDefaults
from logserver.cluster.etcd import (
    CLOSE_TIMEOUT_S,
    ETCD_BACKOFF,
    EtcdStore,
    bounded,
    parse_endpoints,
)
from logserver.cluster.fetcher import ReplicaFetcher
from logserver.cluster.identity import join_cluster_id
from logserver.cluster.known_brokers import KnownBrokers
from logserver.cluster.local_topics import CHECKPOINT_FILE, LocalTopicIds, classify
from logserver.cluster.model import (
    NO_LEADER,
    BrokerInfo,
    ClusterModel,
    Keys,
    PartitionState,
    TopicRecord,
    assign_replicas,
    elect_leader,
    initial_state,
    with_isr,
)
from logserver.cluster.replica_stats import ReplicaStats
from logserver.cluster.replication import LeaderReplica
from logserver.cluster.security_sync import ClusterSecurity
from logserver.cluster.shutdown import without_replica
from logserver.cluster.supervise import StallWatch, supervised
from logserver.cluster.throttle import ReplicationThrottle
from logserver.cluster.topic_configs import apply_topic_configs
from logserver.cluster.txn_state_migration import check_local_txn_state
from logserver.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC, TXN_STATE_TOPIC

if TYPE_CHECKING:
    from logserver.services import BrokerServices
    from logserver.storage.api import StorageEngine

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.5
PRODUCER_ID_BLOCK = 1000
CONNECT_TIMEOUT_S = 30.0
# Registering again after a lost session: for as long as it takes, at most 5 s apart.
REGISTER_BACKOFF = Backoff.seconds(0.1, 5.0)
Source = tuple[int, str, int]  # a leader a fetcher replicates from: node id, host, port
CLUSTER_OFFSETS_PARTITIONS = 50  # Kafka's default offsets.topic.num.partitions
CLUSTER_TXN_STATE_PARTITIONS = 50  # Kafka's default transaction.state.log.num.partitions


class TopicCreationError(Exception):
    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error


class ClusterNode:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        self.clock = broker.clock
        config = broker.config
        self.node_id: int = config["node.id"]
        self.keys = Keys(config["cluster.etcd.prefix"])
        self.model = ClusterModel(self.keys)
        self.replica_stats = ReplicaStats(self.node_id)  # metrics (replica_stats.py)
        self.model.on_partition_change = self.replica_stats.partition_changed
        self.store = EtcdStore(parse_endpoints(config["cluster.etcd.endpoints"]))
        # Cluster-wide ACLs and SCRAM users (logserver/cluster/security_sync.py).
        self.security = ClusterSecurity(self.keys.root, self.store, broker.authorizer, broker.scram)
        self.broker_defaults = ClusterBrokerDefaults(self.keys.root, self.store)
        self.throttle = ReplicationThrottle(self)  # replication quotas (throttle.py)
        self.session_ttl_s = max(2, round(config["broker.session.timeout.ms"] / 1000))
        # The brokers Metadata names: not emptied by a session hiccup (known_brokers.py).
        self.known_brokers = KnownBrokers(self.session_ttl_s)
        self.min_isr: int = config["min.insync.replicas"]
        self.lag_max_ms: int = config["replica.lag.time.max.ms"]
        self.unclean: bool = config["unclean.leader.election.enable"]
        self.leaders: dict[tuple[str, int], LeaderReplica] = {}
        # Followed partitions: (leader epoch, source broker); one fetcher per source
        # broker (id, host, port), Kafka's ReplicaFetcherThread, running while it has any.
        self.fetchers: dict[tuple[str, int], tuple[int, Source]] = {}
        self._sources: dict[Source, tuple[ReplicaFetcher, asyncio.Task[None]]] = {}
        self._proposing: set[tuple[str, int]] = set()
        self._creating: dict[str, asyncio.Task[None]] = {}
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self._seen_topics: set[str] = set()
        self._emptied: set[tuple[str, int]] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self._watch_task: asyncio.Task[Any] | None = None
        self._watch_from = 0  # the next revision the watch is to see
        self._session_task: asyncio.Task[Any] | None = None
        self._unregistered = StallWatch(10 * self.session_ttl_s)
        self._dirty = asyncio.Event()
        self._checkpoint = Path(config.data_dir) / CHECKPOINT_FILE
        self._saved_hw: dict[tuple[str, int], int] = self._load_checkpoint()
        self._hw_forgotten = False  # entries dropped since the checkpoint was written
        # The cluster topic id of each local log (stray logs are deleted); trusted once
        # the records are known to be for this etcd cluster (start()).
        self.local_ids = LocalTopicIds(Path(config.data_dir))
        self._ids_trusted = False
        self._kept_logged: set[str] = set()
        self.ready = asyncio.Event()
        # Lead nothing until the model has caught up to this etcd revision (a broker
        # whose session expired must first see what was decided without it).
        self._fenced_below = 0
        self._pid_lock = asyncio.Lock()
        self._pid_next = self._pid_end = 0
        self.stopping = False  # controlled shutdown under way: follow nothing any more

    @property
    def storage(self) -> StorageEngine:
        return self.broker.engine

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        # As Kafka waits zookeeper.connection.timeout.ms for ZooKeeper: etcd may be
        # starting too (its port open before it answers).
        deadline = self.clock.monotonic() + CONNECT_TIMEOUT_S
        failures = Failures(ETCD_BACKOFF)
        while True:
            try:
                await self.store.connect()
                break
            except ConnectionError as exc:
                if self.clock.monotonic() > deadline:
                    raise
                log.warning("%s; retrying", exc)
                await asyncio.sleep(failures.failed())
        # First of all, as Kafka checks it on connecting to ZooKeeper: one cluster id for
        # every broker, and never a data directory of another cluster (identity.py).
        self.broker.cluster_id = await join_cluster_id(
            self.store, self.keys.cluster_id, Path(self.broker.config.data_dir), self.node_id,
            self.storage.cluster_id or None)
        # Before this broker is live (holding no replica yet): its local __transaction_state
        # may be from before the topic was replicated (txn_state_migration.py).
        raw = await self.store.get(self.keys.topic(TXN_STATE_TOPIC))
        await check_local_txn_state(
            self.broker, None if raw is None else TopicRecord.decode(TXN_STATE_TOPIC, raw[0]).partitions)
        await self.store.grant_lease(self.session_ttl_s)
        await self._register()
        self.storage.replication_hook = self._replicated_internal_append
        # Groups are served where this broker leads their __consumer_offsets partition.
        self.broker.groups.start_partitioned()
        # Likewise transactional ids, where it leads their __transaction_state partition.
        self.broker.transactions.store.cluster_partitions = self._txn_state_partitions
        self.broker.transactions.start_partitioned()
        await self.store.create([(self.keys.incarnation, uuid.uuid4().hex.encode())])
        found = await self.store.get(self.keys.incarnation)
        incarnation = found[0].decode() if found is not None else ""
        self._ids_trusted = self.local_ids.bind(incarnation)
        if not self._ids_trusted:
            log.warning("%s was written for another etcd cluster or prefix (incarnation %s, "
                        "this one is %s): local logs of topics it does not have are kept",
                        self.local_ids.path, self.local_ids.incarnation, incarnation)
        revision, entries = await self.store.snapshot(self.keys.root)
        for key, value, mod in entries:
            self.model.apply(key, value, mod)
            self.security.apply(key, value)
            self.broker_defaults.apply(key, value)
        self.known_brokers.observe(self.model)
        loop = asyncio.get_running_loop()
        self._watch_from = revision + 1
        self._watch_task = loop.create_task(supervised("etcd watch", self._watch))
        self.store.on_new_channel = self._new_watch_elsewhere
        self._session_task = loop.create_task(supervised("etcd session", self._session))
        self._tasks = [
            self._session_task,
            loop.create_task(supervised("reconciliation", self._reconcile_loop)),
            loop.create_task(supervised("periodic checks", self._periodic)),
        ]
        self._dirty.set()
        # Joined once the first reconciliation ran on the whole picture (Kafka's broker
        # likewise catches up with the metadata before it opens its listeners).
        await self.ready.wait()
        log.info("node %d joined the cluster %s at %s (etcd %s), %d live brokers", self.node_id,
                 self.broker.cluster_id, self.keys.prefix, self.store.endpoints,
                 len(self.model.brokers))

    async def controlled_shutdown(self) -> bool:
        """Kafka's controlled shutdown, before the listeners close: every partition this
        broker leads moves to another live ISR member and it leaves the ISR of those it
        follows, each by a compare-and-swap in etcd, and this returns once the watch shows
        it (clients get NOT_LEADER_OR_FOLLOWER here and find the new leader with one
        metadata refresh). Bounded by the session timeout; False if it did not finish
        (etcd unreachable: the lease then expires and the controller moves them)."""
        if not self.broker.config["controlled.shutdown.enable"] or not self.ready.is_set():
            return False
        self.stopping = True
        for where in list(self.fetchers):  # a follower fetching could rejoin an ISR
            self._stop_fetcher(where)
        started = self.clock.monotonic()
        deadline = started + self.session_ttl_s
        moved: dict[tuple[str, int], int] = {}
        while True:
            pending = 0  # leaderships still to move (ISR exits are tried, not awaited)
            live = set(self.model.brokers)
            for where, versioned in list(self.model.partitions.items()):
                new = without_replica(versioned.state, self.node_id, live)
                if new is None:
                    continue
                pending += versioned.state.leader == self.node_id
                try:
                    swapped = await self.store.swap(self.keys.partition(*where), new.encode(),
                                                    versioned.mod_revision)
                    if swapped and versioned.state.leader == self.node_id:
                        moved[where] = new.leader
                except Exception as exc:
                    log.warning("controlled shutdown: %s-%d: %s", *where, exc)
            if not pending:
                break
            if self.clock.monotonic() > deadline:
                log.warning("controlled shutdown: %d partitions not moved in %d s; leaving "
                            "them to the controller", pending, self.session_ttl_s)
                return False
            await asyncio.sleep(0.05)  # the watch shows our writes (or what beat them)
        log.info("controlled shutdown: moved leadership of %d partitions (%s) and left every "
                 "ISR in %.3f s", len(moved), ", ".join(
                     f"{t}-{i}->{n}" for (t, i), n in sorted(moved.items())) or "none",
                 self.clock.monotonic() - started)
        return True

    async def close(self) -> None:
        if self._watch_task is not None:
            self._tasks.append(self._watch_task)
        fetcher_tasks = [t for _, t in self._sources.values()]
        for task in [*self._tasks, *fetcher_tasks, *self._creating.values()]:
            task.cancel()
        for task in [*self._tasks, *fetcher_tasks]:
            with contextlib.suppress(BaseException):
                await task
        for leader in self.leaders.values():
            leader.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._save_checkpoint()
        with contextlib.suppress(Exception):
            await self.store.revoke()  # leave now: leaderships move at once, not after the TTL
        await self.store.close()

    async def _session(self) -> None:
        """Keep the lease alive; when it is lost (paused or cut off past the session
        timeout), stop leading at once, then register again under a new lease, with
        backoff for as long as it takes, resume the watch on a fresh stream and lead
        only what the controller gives us once the watch has caught up."""
        while True:
            await self.store.keep_alive(self.session_ttl_s, self._session_lost)
            log.warning("node %d lost its etcd session: fenced (no leader, no coordinator) "
                        "until it is registered again", self.node_id)
            lost = self.store.lease_id
            failures = Failures(REGISTER_BACKOFF)
            while True:
                try:
                    if self.store.lease_id == lost:
                        # It may still be alive at etcd (we stop leading by our own clock,
                        # at the latest when etcd expires it; a restarted etcd even renews
                        # it): end it, so that registering need not wait for it.
                        with contextlib.suppress(Exception):
                            await bounded(self.store.revoke(), self.session_ttl_s)
                    await self.store.grant_lease(self.session_ttl_s)
                    await self._register()
                    self._fenced_below = await self.store.mod_revision(self.keys.broker(self.node_id))
                    break
                except Exception as exc:
                    delay = failures.failed()
                    log.warning("registering again failed (%r); retrying in %.1f s", exc, delay)
                    await asyncio.sleep(delay)
            await self._restart_watch()
            self._unregistered.stop()
            log.info("node %d registered again (session %x)", self.node_id, self.store.lease_id)
            self._dirty.set()

    def _new_watch_elsewhere(self) -> None:
        """A new etcd channel: a watch stream left on the old one may wait for ever, so
        the watch starts again on the new one (unless it is the watch that replaced it:
        it resumes there by itself)."""
        old = self._watch_task
        if old is None or old is asyncio.current_task():
            return
        old.cancel()
        # awaited at close if it has not ended by then
        self._tasks = [t for t in self._tasks if not t.done()] + [old]
        self._watch_task = asyncio.get_running_loop().create_task(
            supervised("etcd watch", self._watch))

    async def _restart_watch(self) -> None:
        """A new watch stream from where the last one got: the old one may be stuck on
        a channel etcd's restart left half-open, and we stay fenced until it catches up."""
        old = self._watch_task
        if old is not None:
            old.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(old), CLOSE_TIMEOUT_S)
            if not old.done():  # stuck in aetcd: cancelled again at close
                log.warning("the old etcd watch did not end when cancelled; left behind")
                self._tasks.append(old)
        self._watch_task = asyncio.get_running_loop().create_task(
            supervised("etcd watch", self._watch))

    @property
    def fenced(self) -> bool:
        return self.model.revision < self._fenced_below

    def _session_lost(self) -> None:
        """Our lease is gone, or not renewed for a whole session timeout (cut off from
        etcd): another broker may lead our partitions now, so stop acknowledging anything
        (Kafka's fenced broker): Produce and Fetch get NOT_LEADER_OR_FOLLOWER, group and
        transaction requests NOT_COORDINATOR, until we are registered again."""
        self._fenced_below = 2**63 - 1
        self._unregistered.start()
        for where in list(self.leaders):
            self._resign(where)

    def own_info(self) -> BrokerInfo:
        """This broker's registration: its inter-broker listener and every advertised one."""
        advertised = self.broker.config.advertised
        wanted = self.broker.config["inter.broker.listener.name"]
        inter = next((li for li in advertised if li.name == wanted), advertised[0])
        admin = self.broker.admin_address
        if admin is not None and admin[0] in ("0.0.0.0", "::", ""):  # bound to every address
            admin = (inter.host, admin[1])
        return BrokerInfo(self.node_id, inter.host, inter.port, self.broker.config["broker.rack"],
                          tuple((li.name, li.host, li.port) for li in advertised), admin)

    def metadata_brokers(self) -> dict[int, BrokerInfo]:
        """The brokers a Metadata answer names (known_brokers.py): never without this
        one, and not emptied by a moment without sessions."""
        return self.known_brokers.listed(self.model, self.own_info())

    async def _register(self) -> None:
        info = self.own_info()
        deadline = self.clock.monotonic() + 3 * self.session_ttl_s
        waiting = False
        while not await self.store.create([(self.keys.broker(self.node_id), info.encode())],
                                          leased=True):
            # Our previous incarnation's lease (kill -9) has not expired yet.
            if not waiting:
                waiting = True
                log.info("node.id %d is still registered by another session (this broker's "
                         "previous one, if it was killed): waiting up to %d s for it to expire",
                         self.node_id, 3 * self.session_ttl_s)
            if self.clock.monotonic() > deadline:
                raise RuntimeError(f"node.id {self.node_id} is registered by another live broker")
            await asyncio.sleep(0.5)

    # -- the watch --------------------------------------------------------------------------

    async def _watch(self) -> None:
        failures = Failures(ETCD_BACKOFF)
        while True:
            start_revision = self._watch_from
            try:
                async for key, value, mod in self.store.watch(self.keys.root, start_revision):
                    failures.succeeded()
                    if self.model.apply(key, value, mod) == "brokers":
                        self.known_brokers.observe(self.model)
                    self.security.apply(key, value)
                    self.broker_defaults.apply(key, value)
                    self._watch_from = mod + 1
                    self._dirty.set()
                log.info("etcd watch ended (its channel replaced); resuming from revision %d",
                         self._watch_from)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("etcd watch broke (%r); resuming from revision %d", exc,
                            self._watch_from)
                await asyncio.sleep(failures.failed())

    async def _reconcile_loop(self) -> None:
        failures = Failures(ETCD_BACKOFF)
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._reconcile()
                failures.succeeded()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconciling with the cluster state failed; retrying")
                await asyncio.sleep(failures.failed())
                self._dirty.set()

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            self._unregistered.check(f"node {self.node_id} not registered again",
                                     [self._session_task, self._watch_task])
            now = self.clock.monotonic_ms()
            for where, leader in list(self.leaders.items()):
                gone = leader.to_remove(now, self.lag_max_ms)
                if gone:
                    await self._propose_isr(where, leader, [r for r in leader.state.isr if r not in gone])
            self._save_checkpoint()

    async def _reconcile(self) -> None:
        model = self.model
        if self.fenced:
            for where in list(self.leaders):
                self._resign(where)
            return
        if (model.controller_id is None and self.node_id in model.brokers
                and await self.store.create([(self.keys.controller, json.dumps(
                    {"node_id": self.node_id}).encode())], leased=True)):
            log.info("node %d is the controller", self.node_id)
        if model.controller_id == self.node_id:
            await self._controller_pass()
        self._drop_stray_logs()  # before leading or following: a stray log is no replica
        for (topic, index), versioned in list(model.partitions.items()):
            state = versioned.state
            if self.node_id in state.replicas and topic not in self._deleting:
                await self._hold(topic, index, state)
        for where in [w for w in self.fetchers if w not in model.partitions]:
            self._stop_fetcher(where)
        self._drop_moved_replicas()
        await apply_topic_configs(self)  # cluster-wide topic configs (topic_configs.py)
        await self.broker_defaults.install(self.storage)
        if not self.ready.is_set():
            self.ready.set()

    # -- controller -----------------------------------------------------------------------

    async def _controller_pass(self) -> None:
        live = set(self.model.brokers)
        for (topic, index), versioned in list(self.model.partitions.items()):
            new = (elect_leader(versioned.state, live, unclean=self.unclean)
                   or reassignment.complete(versioned.state, live))
            if new is None:
                continue
            if await self.store.swap(self.keys.partition(topic, index), new.encode(),
                                     versioned.mod_revision):
                self.replica_stats.elected(versioned.state, new)
                log.info("controller: %s-%d leader %d -> %d (epoch %d), isr %s", topic, index,
                         versioned.state.leader, new.leader, new.leader_epoch, list(new.isr))

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str],
                           assignment: list[tuple[int, ...]] | None = None) -> TopicRecord:
        """Topic and partition states in one etcd transaction that fails if the topic
        exists: creation is decided once, whichever broker took the request. Without a
        manual ``assignment`` (replicas by partition, checked by the caller), replicas
        are placed over the live brokers."""
        if assignment is None:
            brokers = list(self.model.brokers.values())
            try:
                assignment = assign_replicas(brokers, partitions, replication_factor,
                                             start=hash(name) % max(1, len(brokers)))
            except ValueError as exc:
                raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from None
        record = TopicRecord(name, uuid.uuid4().bytes, partitions, dict(configs))
        puts = [(self.keys.topic(name), record.encode())]
        puts += [(self.keys.partition(name, i), initial_state(replicas).encode())
                 for i, replicas in enumerate(assignment)]
        if not await self.store.create(puts):
            raise TopicCreationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        log.info("created topic %s: %d partitions, replicas %s", name, partitions, assignment)
        return record

    async def add_partitions(self, name: str, total: int,
                             assignment: list[tuple[int, ...]] | None = None) -> TopicRecord:
        """Grow a topic to ``total`` partitions in one etcd transaction that fails if the
        topic changed meanwhile; the new partitions get the topic's replication factor,
        spread as at creation. Existing partitions stay where they are."""
        found = await self.store.get(self.keys.topic(name))
        if found is None:
            raise TopicCreationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        raw, revision = found
        record = TopicRecord.decode(name, raw)
        if total <= record.partitions:
            raise TopicCreationError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {record.partitions} partitions, which is higher than or "
                f"equal to the requested {total}.")
        first = self.model.partition(name, 0)
        rf = len(first.replicas) if first is not None else 1
        brokers = list(self.model.brokers.values())
        if assignment is None:
            try:
                assignment = assign_replicas(brokers, total - record.partitions, rf,
                                             start=(hash(name) + record.partitions) % max(1, len(brokers)))
            except ValueError as exc:
                raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from None
        grown = TopicRecord(name, record.topic_id, total, dict(record.configs))
        puts = [(self.keys.partition(name, record.partitions + i), initial_state(replicas).encode())
                for i, replicas in enumerate(assignment)]
        if not await self.store.swap_and_create(self.keys.topic(name), grown.encode(), revision, puts):
            raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                     f"topic {name!r} changed meanwhile; try again")
        log.info("grew topic %s from %d to %d partitions, new replicas %s", name,
                 record.partitions, total, assignment)
        return grown

    async def delete_topic(self, name: str) -> bool:
        """The topic and its partition states in one transaction; every broker deletes
        its local log when its watch sees the topic go. False if it did not exist."""
        record = self.model.topics.get(name)
        if record is None:
            return False
        keys = [self.keys.topic(name)] + [self.keys.partition(name, i) for i in range(record.partitions)]
        return await self.store.delete_existing(keys)

    async def ensure_offsets_topic(self) -> None:
        """``__consumer_offsets`` as a replicated cluster topic, created through etcd on
        the first FindCoordinator as Kafka does: ``offsets.topic.num.partitions``
        partitions (50 unless set: a single node's default of 1 would put every group on
        one broker) and ``offsets.topic.replication.factor`` replicas, capped by the live
        brokers."""
        if OFFSETS_TOPIC in self.model.topics:
            return
        config = self.broker.config
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(config["offsets.topic.segment.bytes"])}
        partitions = config["offsets.topic.num.partitions"] \
            if "offsets.topic.num.partitions" in config.sources else CLUSTER_OFFSETS_PARTITIONS
        replicas = min(config["offsets.topic.replication.factor"], len(self.model.brokers))
        with contextlib.suppress(TopicCreationError):
            await self.create_topic(OFFSETS_TOPIC, partitions, max(1, replicas), configs)

    async def ensure_txn_state_topic(self) -> None:
        """``__transaction_state`` as a replicated cluster topic, created through etcd on
        the first transactional FindCoordinator as Kafka does:
        ``transaction.state.log.num.partitions`` partitions (50 unless set) and
        ``transaction.state.log.replication.factor`` replicas, capped by the live brokers."""
        if TXN_STATE_TOPIC in self.model.topics:
            return
        config = self.broker.config
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(config["transaction.state.log.segment.bytes"])}
        partitions = config["transaction.state.log.num.partitions"] \
            if "transaction.state.log.num.partitions" in config.sources else CLUSTER_TXN_STATE_PARTITIONS
        replicas = min(config["transaction.state.log.replication.factor"], len(self.model.brokers))
        with contextlib.suppress(TopicCreationError):
            await self.create_topic(TXN_STATE_TOPIC, partitions, max(1, replicas), configs)

    def _txn_state_partitions(self) -> int | None:
        record = self.model.topics.get(TXN_STATE_TOPIC)
        return None if record is None else record.partitions

    def _drop_stray_logs(self) -> None:
        """Delete the local logs of topics the cluster no longer has, or has under another
        topic id (deleted, or deleted and created again, also while this broker was down),
        as Kafka's brokers delete stray logs. Only on the word of the records in
        ``cluster-topic-ids`` (local_topics.py); without them, only topics deleted while
        this broker watched go."""
        self._seen_topics.update(self.model.topics)
        names = self.storage.topic_names()
        local = [n for n in names if n not in INTERNAL_TOPICS and n not in self._creating
                 and n not in self._deleting]
        if not self._ids_trusted:
            for name in local:
                if name not in self.model.topics and name in self._seen_topics:
                    self._delete_local(name, replaced=False)
            return
        verdicts = classify(local, {n: r.topic_id for n, r in self.model.topics.items()},
                            self.local_ids.ids)
        if verdicts.adopt:
            self.local_ids.remember_all(verdicts.adopt)
            log.info("local logs recorded as the cluster's topics of their names: %s",
                     ", ".join(sorted(verdicts.adopt)))
        for name in verdicts.unknown:
            if name not in self._kept_logged:
                self._kept_logged.add(name)
                log.warning("local log of %s: the cluster has no such topic and no record says "
                            "it had one; kept", name)
        for name in verdicts.gone:
            log.info("local log of %s: the topic was deleted from the cluster; deleting it", name)
            self._delete_local(name, replaced=False)
        for name in verdicts.replaced:
            log.info("local log of %s: topic id %s, the cluster's is %s (deleted and created "
                     "again); deleting it", name, self.local_ids.ids[name].hex(),
                     self.model.topics[name].topic_id.hex())
            self._delete_local(name, replaced=True)
        for name in set(self.local_ids.ids) - set(names) - set(self._creating) - set(self._deleting):
            self.local_ids.forget(name)  # its local log is gone (or was never created)

    def _delete_local(self, name: str, *, replaced: bool) -> None:
        """Stop leading and following the topic and delete its local log (in a task);
        then forget its record, and reconcile again, which creates the log of a topic
        that was ``replaced`` afresh. A deleted topic's committed offsets go too; those
        of one replaced belong to the new topic."""
        for where in [w for w in {*self.leaders, *self.fetchers} if w[0] == name]:
            self._resign(where)
            self._stop_fetcher(where)
        self._forget_hw(name)
        self._emptied = {w for w in self._emptied if w[0] != name}
        self._delete_in_task(name, self.storage.delete_topic if replaced else self.broker.delete_topic,
                             "deleted the local log of %s")

    def _delete_in_task(self, name: str, deleter: Callable[[str], Awaitable[object]],
                        done: str) -> None:
        """Delete a topic's local log off the reconcile pass; ``_deleting`` holds the task
        until it is gone, and a reconcile follows."""
        async def delete() -> None:
            try:
                await deleter(name)
                self._forget_hw(name)
                if self._ids_trusted:
                    self.local_ids.forget(name)
                log.info(done, name)
            except Exception as exc:
                log.warning("deleting the local log of %s failed: %s", name, exc)
            finally:
                self._deleting.pop(name, None)
                self._dirty.set()

        self._deleting[name] = asyncio.get_running_loop().create_task(delete())

    def _forget_hw(self, topic: str) -> None:
        for where in [w for w in self._saved_hw if w[0] == topic]:
            self._saved_hw.pop(where)
            self._hw_forgotten = True

    def _drop_moved_replicas(self) -> None:
        """Replicas reassigned away from this broker: stop leading or following them and
        delete the local copy (the whole topic when no partition of it stays here)."""
        for where in [w for w in {*self.leaders, *self.fetchers}
                      if (s := self.model.partition(*w)) is not None and self.node_id not in s.replicas]:
            self._resign(where)
            self._stop_fetcher(where)
            self._saved_hw.pop(where, None)  # if it comes back, it starts from its own log
            log.info("%s-%d: reassigned away from this broker", *where)
        local = {name: count for name in self.storage.topic_names()
                 if name not in INTERNAL_TOPICS and name not in self._creating
                 and name not in self._deleting
                 and (count := self.storage.partition_count(name)) is not None}
        topics, partitions = reassignment.unassigned(self.model, self.node_id, local)
        loop = asyncio.get_running_loop()
        for name in topics:  # the storage's delete, not the broker's: committed offsets stay
            self._delete_in_task(name, self.storage.delete_topic,
                                 "deleted the local copy of %s (no replica here any more)")
        self._emptied &= set(partitions)  # assigned here again: empty it again when it leaves
        for where in partitions:
            if where in self._emptied or not self.storage.log_end_offset(*where):
                continue
            self._emptied.add(where)

            async def empty(at: tuple[str, int] = where) -> None:
                try:
                    await self.storage.truncate_to(*at, 0)
                    self._saved_hw.pop(at, None)
                    log.info("%s-%d: emptied the local copy (no replica here any more)", *at)
                except Exception as exc:
                    log.warning("%s-%d: emptying the local copy failed: %s", *at, exc)
            loop.create_task(empty())

    # -- holding a replica ------------------------------------------------------------------

    async def _hold(self, topic: str, index: int, state: PartitionState) -> None:
        where = (topic, index)
        local = self.storage.partition_count(topic)
        if local is None or local <= index:
            self._create_locally(topic, grow=local is not None)
            return  # reconciled again once the local log exists
        if state.leader == self.node_id:
            self._stop_fetcher(where)
            self._lead(where, state)
        else:
            self._resign(where)
            if not self.stopping:
                await self._follow(where, state)

    def _create_locally(self, topic: str, *, grow: bool = False) -> None:
        if topic in self._creating or topic in self._deleting or topic not in self.model.topics:
            return
        record = self.model.topics[topic]
        if self._ids_trusted:  # recorded first: a log on disk is never without its record
            self.local_ids.remember(topic, record.topic_id)

        async def create() -> None:
            try:
                if grow:  # CreatePartitions: the topic gained partitions in etcd
                    await self.storage.add_partitions(topic, record.partitions)
                else:
                    await self.broker.create_topic(topic, record.partitions, record.configs)
            except Exception as exc:
                log.error("creating the local log of %s failed: %s", topic, exc)
                await asyncio.sleep(1)
            finally:
                self._creating.pop(topic, None)
                self._dirty.set()

        self._creating[topic] = asyncio.get_running_loop().create_task(create())

    def _lead(self, where: tuple[str, int], state: PartitionState) -> None:
        current = self.leaders.get(where)
        if current is not None and current.state.leader_epoch == state.leader_epoch:
            current.update_state(state)
        else:
            hw = self._saved_hw.get(where, 0) if current is None else current.hw
            hw = min(max(hw, self.storage.high_watermark(*where) or 0),
                     self.storage.log_end_offset(*where) or 0)
            current = LeaderReplica(self.node_id, state, hw, self.clock.monotonic_ms(),
                                    epoch_start=self.storage.log_end_offset(*where) or 0)
            self.leaders[where] = current
            log.info("%s-%d: leader at epoch %d, isr %s, high watermark %d", *where,
                     state.leader_epoch, list(state.isr), hw)
        self.storage.set_leader_epoch(*where, state.leader_epoch)
        self.storage.set_high_watermark(*where, current.hw)
        self.advance(where)
        if where[0] == OFFSETS_TOPIC:  # its groups are ours to coordinate now
            self.broker.groups.load_partition(where[1])
        elif where[0] == TXN_STATE_TOPIC:  # and its transactional ids
            self.broker.transactions.load_partition(where[1], state.leader_epoch)

    def _resign(self, where: tuple[str, int]) -> None:
        leader = self.leaders.pop(where, None)
        if leader is not None:
            leader.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            log.info("%s-%d: no longer leader", *where)
        if where[0] == OFFSETS_TOPIC:
            self.broker.groups.unload_partition(where[1])
        elif where[0] == TXN_STATE_TOPIC:
            self.broker.transactions.unload_partition(where[1])

    async def _follow(self, where: tuple[str, int], state: PartitionState) -> None:
        running = self.fetchers.get(where)
        if running is not None and running[0] == state.leader_epoch:
            return
        self._stop_fetcher(where)
        if running is None:
            # Becoming a follower (start-up or after leading): consumers of this replica
            # see no more than the high watermark we knew; the fetcher truncates a
            # divergent tail with OffsetForLeaderEpoch before fetching.
            hw = self.storage.high_watermark(*where)
            known = self._saved_hw.get(where) if self.storage.log_end_offset(*where) == hw else hw
            self.storage.set_high_watermark(*where, known or 0)
        leader = self.model.brokers.get(state.leader)
        if state.leader == NO_LEADER or leader is None:
            return
        source = (state.leader, leader.host, leader.port)
        running_source = self._sources.get(source)
        if running_source is None:
            fetcher = ReplicaFetcher(self.storage, self.node_id, (leader.host, leader.port),
                                     self.throttle)
            running_source = (fetcher, asyncio.get_running_loop().create_task(fetcher.run()))
            self._sources[source] = running_source
        running_source[0].add(where, state.leader_epoch)
        self.fetchers[where] = (state.leader_epoch, source)

    def _stop_fetcher(self, where: tuple[str, int]) -> None:
        running = self.fetchers.pop(where, None)
        if running is None:
            return
        source = self._sources.get(running[1])
        if source is not None:
            source[0].remove(where)
            if not source[0].partitions:  # nothing more to fetch from that broker
                source[1].cancel()
                del self._sources[running[1]]

    # -- leader duties (called by the handlers) ----------------------------------------------

    def advance(self, where: tuple[str, int]) -> None:
        leader = self.leaders.get(where)
        if leader is None:
            return
        leo = self.storage.log_end_offset(*where) or 0
        if leader.advance(leo):
            self.storage.set_high_watermark(*where, leader.hw)

    def follower_fetched(self, where: tuple[str, int], replica: int, fetch_offset: int) -> None:
        leader = self.leaders.get(where)
        if leader is None:
            return
        leo = self.storage.log_end_offset(*where) or 0
        leader.follower_fetched(replica, fetch_offset, leo, self.clock.monotonic_ms())
        self.advance(where)
        # Only live brokers join (a stopping broker's last fetches must not flap the ISR
        # against the controller, which drops brokers without a session).
        # As Kafka's maybeExpandIsr: only the replica that fetched, so that one that
        # stopped fetching (a controlled shutdown) is not taken back by others' fetches.
        joining = [r for r in leader.to_add() if r == replica and r in self.model.brokers]
        if joining and where not in self._proposing:
            asyncio.get_running_loop().create_task(
                self._propose_isr(where, leader, [*leader.state.isr, *joining]))

    async def _propose_isr(self, where: tuple[str, int], leader: LeaderReplica,
                           isr: list[int]) -> None:
        """Kafka's AlterPartition, as a compare-and-swap on the partition's key: it fails
        if anyone (the controller, a newer leader) changed the partition since."""
        versioned = self.model.partitions.get(where)
        if versioned is None or versioned.state != leader.state or where in self._proposing \
                or set(isr) == set(leader.state.isr):
            return
        self._proposing.add(where)
        try:
            new = with_isr(leader.state, isr)
            if await self.store.swap(self.keys.partition(*where), new.encode(), versioned.mod_revision):
                log.info("%s-%d: isr %s -> %s", *where, list(leader.state.isr), list(new.isr))
        except Exception as exc:
            log.warning("%s-%d: ISR change failed: %s", *where, exc)
        finally:
            self._proposing.discard(where)

    def _replicated_internal_append(self, topic: str, partition: int) -> Awaitable[None] | None:
        """The group coordinator's writes to ``__consumer_offsets`` count once the ISR
        has them, as Kafka's coordinator appends with acks=all: a commit acknowledged is
        a commit the next coordinator replays. Other topics: the Produce handler decides."""
        where = (topic, partition)
        if topic not in INTERNAL_TOPICS or where not in self.model.partitions:
            return None
        leader = self.leaders.get(where)
        if leader is None:
            return _failed(f"not the leader of {topic}-{partition}")
        if topic == TXN_STATE_TOPIC:  # Kafka's transaction.state.log.min.isr
            wanted = min(self.broker.config["transaction.state.log.min.isr"], len(leader.state.replicas))
            if len(leader.state.isr) < wanted:
                return _failed(f"{topic}-{partition}: isr {list(leader.state.isr)} below "
                               f"transaction.state.log.min.isr {wanted}")
        self.advance(where)
        end = self.storage.log_end_offset(*where) or 0
        return _raise_unless_none(leader.wait_for(end), topic, partition)

    # -- producer ids -------------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """Ids unique cluster-wide (KIP-730's blocks): a broker reserves a block by a
        compare-and-swap of the next free id in etcd, then hands ids out from memory."""
        async with self._pid_lock:
            if self._pid_next >= self._pid_end:
                key = self.keys.producer_id_block
                while True:
                    found = await self.store.get(key)
                    if found is None:
                        start = 0
                        if await self.store.create([(key, str(PRODUCER_ID_BLOCK).encode())]):
                            break
                        continue
                    start = int(found[0])
                    if await self.store.swap(key, str(start + PRODUCER_ID_BLOCK).encode(), found[1]):
                        break
                self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
                log.info("reserved producer ids %d..%d", start, start + PRODUCER_ID_BLOCK - 1)
            producer_id = self._pid_next
            self._pid_next += 1
            return producer_id

    # -- high watermark checkpoint ------------------------------------------------------------

    def _load_checkpoint(self) -> dict[tuple[str, int], int]:
        try:
            raw = json.loads(self._checkpoint.read_text())
        except (OSError, ValueError):
            return {}
        return {(t, int(p)): int(hw) for t, p, hw in raw}

    def _save_checkpoint(self) -> None:
        """Kafka's replication-offset-checkpoint: the high watermarks, so a restarted
        follower knows below which offset its log is committed."""
        current = dict(self._saved_hw)
        for where in {*self.leaders, *self.fetchers}:  # partitions with a replicated hw
            hw = self.storage.high_watermark(*where)
            if hw is not None:
                current[where] = hw
        if current == self._saved_hw and not self._hw_forgotten:
            return
        tmp = self._checkpoint.with_suffix(".tmp")
        tmp.write_text(json.dumps([[t, p, hw] for (t, p), hw in sorted(current.items())]))
        os.replace(tmp, self._checkpoint)
        self._saved_hw = current
        self._hw_forgotten = False


async def _failed(why: str) -> None:
    raise OSError(why)


async def _raise_unless_none(waiting: asyncio.Future[int], topic: str, partition: int) -> None:
    error = await waiting
    if error != ErrorCode.NONE:
        raise OSError(f"{topic}-{partition} not replicated: {ErrorCode(error).name}")
