"""etcd killed (-9) and restarted on its data dir, several times, while three brokers
take acks=all writes: every broker loses its session each time, and must get a new one,
register again and resume its watch (its replicas back in sync) every time, for as long
as it takes (issue 21: a broker's session and watch once hung for good after an etcd
call failed on a channel etcd's restart left half-open).
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer
from helpers.cluster_clients import create
from helpers.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROUNDS = 3


class Writer:
    """acks=all writes without pause in a thread, so that etcd dies with brokers mid-call."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "linger.ms": 5, "message.timeout.ms": 120000})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.produce(self._topic, value=b"%d" % self.sent)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0.01)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)


def test_every_broker_registers_again_after_each_etcd_kill(cluster, etcd):
    create(cluster, "restarts", partitions=3, rf=3)
    brokers = cluster.brokers

    def count(text: str) -> dict[int, int]:
        return {n: b.output().count(text) for n, b in brokers.items()}

    with Writer(cluster.bootstrap, "restarts"):
        for round_ in range(1, ROUNDS + 1):
            lost, back = count("session is lost"), count("registered again (session")
            etcd.kill9()
            try:
                # Down past the session timeout: every broker has lost its session.
                wait_until(lambda lost=lost: all(count("session is lost")[n] > lost[n]
                                                 for n in brokers), 30,
                           f"round {round_}: every broker to lose its session")
            finally:
                etcd.start()
            try:
                wait_until(lambda back=back: all(count("registered again (session")[n] > back[n]
                                                 for n in brokers), 60,
                           f"round {round_}: every broker to register again")
                # The watch resumed too: the controller's view reaches every follower.
                wait_until(lambda: all(len(cluster.partition("restarts", i).isrs) == 3
                                       for i in range(3)), 60,
                           f"round {round_}: replicas back in sync")
            except AssertionError as exc:
                tails = "\n".join(f"--- node {n} ---\n{b.output_tail(4000)}"
                                  for n, b in brokers.items())
                raise AssertionError(f"{exc}\n{tails}") from None
    for node, broker in brokers.items():
        assert "Task was destroyed but it is pending" not in broker.output(), node
