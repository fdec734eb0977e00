"""Real etcd and real broker processes for the cluster tests, all on 127.0.0.1.

``EtcdProcess`` runs Debian's ``/usr/bin/etcd`` (tests/run.sh installs etcd-server) on
free ports with its own data directory; ``Cluster`` starts N ``logserver`` processes
joined through it. Every process is stopped by its own pid (commonlib.childproc).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from commonlib.childproc import HOST, ListeningChild, free_port
from helpers.kafkaclient import BlockingClient
from helpers.serverproc import ServerProcess
from helpers.waiting import wait_until
from kafkaproto import ApiKey
from kafkaproto.messages import MetadataRequest

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
JOIN_TIMEOUT_S = 60.0  # a broker listens once it has joined the cluster


class EtcdProcess(ListeningChild):
    name = "etcd"

    def __init__(self, data_dir: Path, *, netns: str | None = None, host: str = HOST) -> None:
        """``netns``: run inside that network namespace, serving on ``host`` there."""
        self.data_dir = data_dir
        self.peer_port = free_port()
        super().__init__(data_dir.parent / "etcd.log", free_port())
        self.netns = netns
        self.host = host

    def command(self) -> list[str]:
        client = f"http://{self.host}:{self.port}"
        peer = f"http://{HOST}:{self.peer_port}"  # a one-member cluster: peers on loopback
        inside = ["ip", "netns", "exec", self.netns] if self.netns is not None else []
        return [*inside, ETCD, "--name", "test", "--data-dir", str(self.data_dir),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"test={peer}"]


def own_metadata(port: int, host: str = HOST) -> tuple[str | None, list[int]]:
    """(cluster id, broker ids) in the Metadata answer of the broker on ``port`` itself
    (a client library may ask any broker it has learnt of)."""
    client = BlockingClient(port, host=host, timeout=10)
    try:
        answer = client.call(ApiKey.METADATA, 12, MetadataRequest(
            topics=[], allow_auto_topic_creation=False))
    finally:
        client.close()
    return answer.cluster_id, sorted(b.node_id for b in answer.brokers)


def stored_cluster_id(data_dir: Path) -> str:
    """The cluster.id line of a broker's meta.properties."""
    lines = (data_dir / "meta.properties").read_text().splitlines()
    [value] = [line.split("=", 1)[1] for line in lines if line.startswith("cluster.id=")]
    return value


class Cluster:
    """N brokers (node ids 1..N) sharing one etcd and one key prefix.

    ``hosts`` places broker N in network namespace ``hosts[N][0]``, serving on address
    ``hosts[N][1]`` there (tests/helpers/netns.py); without it every broker is on 127.0.0.1."""

    def __init__(self, root: Path, etcd: EtcdProcess, nodes: int, *,
                 hosts: dict[int, tuple[str, str]] | None = None, **settings: object) -> None:
        self.etcd = etcd
        self.brokers: dict[int, ServerProcess] = {}
        self.paused = set()
        for node in range(1, nodes + 1):
            netns, host = (hosts or {}).get(node, (None, HOST))
            # Ready (listening) once joined: start-up includes etcd, as wait_for_brokers did.
            self.brokers[node] = ServerProcess(root / f"node{node}", netns=netns, host=host,
                                               startup_timeout=JOIN_TIMEOUT_S, settings={
                "node.id": node, "cluster.etcd.endpoints": etcd.address,
                "cluster.etcd.prefix": f"/test-{root.name}",
                "broker.session.timeout.ms": 3000, **settings})

    #: brokers paused with SIGSTOP: left out of the bootstrap list (they accept
    #: connections and never answer)
    paused: set[int]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for n, b in self.brokers.items()
                        if b.running and n not in self.paused)

    def pause(self, node: int) -> None:
        proc = self.brokers[node].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        proc = self.brokers[node].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
        self.paused.discard(node)

    def start(self) -> Cluster:
        for broker in self.brokers.values():
            broker.start()
        self.wait_for_brokers(set(self.brokers))
        return self

    def stop(self) -> None:
        for node in list(self.paused):
            self.resume(node)
        for broker in self.brokers.values():
            broker.stop()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self) -> Any:
        return self.admin().list_topics(timeout=10)

    def wait_for_brokers(self, nodes: set[int], timeout: float = 60) -> None:
        try:
            wait_until(lambda: set(self.metadata().brokers) == nodes, timeout,
                       f"Metadata to list brokers {sorted(nodes)}")
        except AssertionError as exc:
            tails = "\n".join(f"--- node {n} ---\n{b.output_tail(3000)}"
                              for n, b in self.brokers.items())
            raise AssertionError(f"{exc}\n{tails}") from None

    def partition(self, topic: str, index: int) -> Any:
        topic_meta = self.metadata().topics.get(topic)
        if topic_meta is None or topic_meta.error is not None:
            return None
        return topic_meta.partitions.get(index)


@contextlib.contextmanager
def running_cluster(root: Path, nodes: int = 3, **settings: object) -> Iterator[Cluster]:
    """A fresh etcd and ``nodes`` brokers under ``root``; all stopped on the way out."""
    etcd = EtcdProcess(root / "etcd-data")
    etcd.start()
    cluster = Cluster(root, etcd, nodes, **settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        etcd.stop()
