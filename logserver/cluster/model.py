"""The cluster as etcd holds it, sans I/O: keys, values, and the decisions taken on them.

Every broker keeps a ``ClusterModel`` fed by one etcd watch on the cluster prefix. The
values are JSON, one key per thing that changes on its own:

- ``{prefix}/brokers/{node_id}``: a live broker (host, port, rack), under its lease;
- ``{prefix}/controller``: the controller's node id, under its lease;
- ``{prefix}/incarnation``: a random id created once (cluster/local_topics.py);
- ``{prefix}/topics/{name}``: topic id, partition count, config overrides;
- ``{prefix}/partitions/{topic}/{index}``: replicas, leader, leader epoch, ISR,
  partition epoch; only ever changed by a compare-and-swap on its mod revision.

The functions at the end (replica placement, leader election, ISR changes, high
watermark) are pure, so they are tested without etcd.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker: ``host``/``port`` is its inter-broker listener (followers fetch
    there); ``listeners`` every advertised listener by name, so Metadata tells a client
    the address of the listener it came in on, as Kafka does."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()
    #: its admin HTTP listener, where the others read its byte rates (admin/throughput.py)
    admin: tuple[str, int] | None = None

    def address(self, listener: str) -> tuple[str, int]:
        """The broker's address on the named listener (else the inter-broker one)."""
        return next(((host, port) for name, host, port in self.listeners if name == listener),
                    (self.host, self.port))

    def encode(self) -> bytes:
        return json.dumps({"node_id": self.node_id, "host": self.host, "port": self.port,
                           "rack": self.rack,
                           "listeners": [list(listener) for listener in self.listeners],
                           "admin": None if self.admin is None else list(self.admin)}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> BrokerInfo:
        d = json.loads(raw)
        listeners = tuple((str(n), str(h), int(p)) for n, h, p in d.get("listeners", ()))
        admin = d.get("admin")
        return cls(int(d["node_id"]), str(d["host"]), int(d["port"]), d.get("rack"), listeners,
                   None if admin is None else (str(admin[0]), int(admin[1])))


@dataclass(frozen=True)
class PartitionState:
    """Kafka's partition registration: who holds it, who leads, who is in sync."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0
    # A reassignment under way (KIP-455): ``replicas`` is then the target followed by
    # the replicas leaving; both lists are empty otherwise (and absent from the JSON).
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def encode(self) -> bytes:
        d: dict[str, object] = {"replicas": list(self.replicas), "leader": self.leader,
                                "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                                "partition_epoch": self.partition_epoch}
        if self.adding or self.removing:
            d["adding_replicas"] = list(self.adding)
            d["removing_replicas"] = list(self.removing)
        return json.dumps(d).encode()

    @classmethod
    def decode(cls, raw: bytes) -> PartitionState:
        d = json.loads(raw)
        return cls(tuple(d["replicas"]), int(d["leader"]), int(d["leader_epoch"]),
                   tuple(d["isr"]), int(d["partition_epoch"]),
                   tuple(d.get("adding_replicas", ())), tuple(d.get("removing_replicas", ())))

    def offline_replicas(self, live: Iterable[int]) -> list[int]:
        alive = set(live)
        return [r for r in self.replicas if r not in alive]


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: bytes
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps({"topic_id": self.topic_id.hex(), "partitions": self.partitions,
                           "configs": dict(self.configs)}).encode()

    @classmethod
    def decode(cls, name: str, raw: bytes) -> TopicRecord:
        d = json.loads(raw)
        return cls(name, bytes.fromhex(d["topic_id"]), int(d["partitions"]), dict(d["configs"]))


@dataclass(frozen=True)
class Versioned:
    """A partition state and the etcd mod revision it was read at (the CAS token)."""

    state: PartitionState
    mod_revision: int


class Keys:
    """Key names under one cluster's prefix, and their parsing back."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.rstrip("/")
        self.root = f"{self.prefix}/".encode()

    def broker(self, node_id: int) -> bytes:
        return f"{self.prefix}/brokers/{node_id}".encode()

    @property
    def cluster_id(self) -> bytes:
        return f"{self.prefix}/cluster_id".encode()

    @property
    def producer_id_block(self) -> bytes:
        return f"{self.prefix}/producer_id_block".encode()

    @property
    def incarnation(self) -> bytes:
        """A random id written once: which etcd cluster a broker's local records are for."""
        return f"{self.prefix}/incarnation".encode()

    @property
    def controller(self) -> bytes:
        return f"{self.prefix}/controller".encode()

    def topic(self, name: str) -> bytes:
        return f"{self.prefix}/topics/{name}".encode()

    def partition(self, topic: str, index: int) -> bytes:
        return f"{self.prefix}/partitions/{topic}/{index}".encode()

    def parse(self, key: bytes) -> tuple[str, ...] | None:
        if not key.startswith(self.root):
            return None
        parts = key[len(self.root):].decode().split("/")
        if parts == ["controller"]:
            return ("controller",)
        if parts == ["cluster_id"]:
            return ("cluster_id",)
        if len(parts) == 2 and parts[0] in ("brokers", "topics"):
            return (parts[0], parts[1])
        if len(parts) == 3 and parts[0] == "partitions":  # topic names have no "/"
            return ("partitions", parts[1], parts[2])
        return None


class ClusterModel:
    """What one broker knows of the cluster, as of the last etcd event it applied."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id: int | None = None
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicRecord] = {}
        self.partitions: dict[tuple[str, int], Versioned] = {}
        self.revision = 0
        #: Called with a partition's state before and after each change (metrics).
        self.on_partition_change: Callable[[PartitionState | None, PartitionState | None],
                                           None] | None = None

    def apply(self, key: bytes, value: bytes | None, mod_revision: int) -> str | None:
        """One put (``value``) or delete (None); returns the kind of thing that changed."""
        self.revision = max(self.revision, mod_revision)
        parsed = self.keys.parse(key)
        if parsed is None:
            return None
        kind = parsed[0]
        if kind == "cluster_id":
            self.cluster_id = None if value is None else value.decode()
        elif kind == "controller":
            self.controller_id = None if value is None else int(json.loads(value)["node_id"])
        elif kind == "brokers":
            node = int(parsed[1])
            if value is None:
                self.brokers.pop(node, None)
            else:
                self.brokers[node] = BrokerInfo.decode(value)
        elif kind == "topics":
            if value is None:
                self.topics.pop(parsed[1], None)
            else:
                self.topics[parsed[1]] = TopicRecord.decode(parsed[1], value)
        else:
            where = (parsed[1], int(parsed[2]))
            before = self.partitions.get(where)
            if value is None:
                self.partitions.pop(where, None)
            else:
                self.partitions[where] = Versioned(PartitionState.decode(value), mod_revision)
            if self.on_partition_change is not None:
                after = self.partitions.get(where)
                self.on_partition_change(None if before is None else before.state,
                                         None if after is None else after.state)
        return kind

    def partition(self, topic: str, index: int) -> PartitionState | None:
        found = self.partitions.get((topic, index))
        return None if found is None else found.state

    def topic_for_id(self, topic_id: bytes | None) -> str | None:
        """The name of the topic with this id (KIP-516), None for an unknown id."""
        return next((name for name, record in self.topics.items()
                     if record.topic_id == topic_id), None)

    def topic_partitions(self, topic: str) -> list[tuple[int, PartitionState]]:
        record = self.topics.get(topic)
        if record is None:
            return []
        return [(i, v.state) for i in range(record.partitions)
                if (v := self.partitions.get((topic, i))) is not None]


# -- decisions ------------------------------------------------------------------------------

def rack_alternated(brokers: Iterable[BrokerInfo]) -> list[int]:
    """Broker ids ordered so that neighbours sit on different racks where possible
    (Kafka's rack-aware assignment starts from the same interleaving)."""
    by_rack: dict[str | None, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.node_id):
        by_rack.setdefault(b.rack, []).append(b.node_id)
    racks = [by_rack[r] for r in sorted(by_rack, key=lambda r: (r is None, r or ""))]
    out: list[int] = []
    for i in range(max((len(r) for r in racks), default=0)):
        out.extend(r[i] for r in racks if i < len(r))
    return out


def assign_replicas(brokers: Iterable[BrokerInfo], partitions: int, replication_factor: int,
                    start: int = 0) -> list[tuple[int, ...]]:
    """Replica lists, the first replica (preferred leader) rotating over the brokers and
    each list taking consecutive brokers of the rack-alternated order, so that a
    partition's replicas sit on as many racks as there are, and leaders spread evenly."""
    order = rack_alternated(brokers)
    if replication_factor > len(order):
        raise ValueError(f"replication factor {replication_factor} is larger than the "
                         f"{len(order)} live brokers")
    n = len(order)
    return [tuple(order[(start + p + j) % n] for j in range(replication_factor))
            for p in range(partitions)]


def initial_state(replicas: tuple[int, ...]) -> PartitionState:
    return PartitionState(replicas, replicas[0], 0, replicas, 0)


def elect_leader(state: PartitionState, live: Iterable[int], *,
                 unclean: bool = False) -> PartitionState | None:
    """The controller's step when brokers come and go; None when nothing changes.

    A dead leader is replaced by the first live ISR member in replica order (leader
    epoch + 1); dead brokers leave the ISR, except the last member, kept so that it is
    elected again when it returns. With no live ISR member the partition goes offline
    (NO_LEADER), unless ``unclean`` lets a live out-of-sync replica lead.
    """
    alive = set(live)
    live_isr = tuple(r for r in state.isr if r in alive)
    if state.leader in alive:
        if live_isr == state.isr:
            return None
        return replace(state, isr=live_isr, partition_epoch=state.partition_epoch + 1)
    candidates = [r for r in state.replicas if r in live_isr]
    isr = live_isr
    if not candidates and unclean:
        candidates = [r for r in state.replicas if r in alive]
        isr = tuple(candidates[:1])
    if not candidates:
        if state.leader == NO_LEADER:
            return None
        return replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1,
                       isr=live_isr or state.isr, partition_epoch=state.partition_epoch + 1)
    return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1,
                   isr=isr, partition_epoch=state.partition_epoch + 1)


def with_isr(state: PartitionState, isr: Iterable[int]) -> PartitionState:
    """An ISR change by the leader (kept in replica order)."""
    members = set(isr)
    return replace(state, isr=tuple(r for r in state.replicas if r in members),
                   partition_epoch=state.partition_epoch + 1)


def high_watermark(leader_id: int, leader_leo: int, follower_leos: Mapping[int, int],
                   isr: Iterable[int]) -> int:
    """The minimum log end offset over the ISR (an unknown follower counts as 0)."""
    return min((leader_leo if r == leader_id else follower_leos.get(r, 0) for r in isr),
               default=leader_leo)
